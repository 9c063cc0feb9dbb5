"""JSON API shapes of event ingestion, daily metrics, streaks, alerts and hallucination reports."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field

from webapp.core.public import PublicModel
from webapp.metrics.alert_states import AlertState
from webapp.metrics.models import HallucinationStatus
from webapp.web.api_schemas import Day


class EventError(BaseModel):
    """One problem with an event: the field and the reason."""

    field: str
    reason: str


class EventResult(BaseModel):
    """What became of one event of the batch (field, reason and errors only when invalid)."""

    index: int
    event_id: str | None
    status: Literal["created", "duplicate", "invalid"]
    field: str | None = Field(None, description="The first invalid field (invalid events only)")
    reason: str | None = Field(None, description="Why the first invalid field is invalid (invalid events only)")
    errors: list[EventError] | None = Field(None, description="Every problem (invalid events only)")


class IngestPublic(BaseModel):
    """One result per event, in order, and how many were created, duplicates or invalid."""

    results: list[EventResult]
    created: int
    duplicate: int
    invalid: int


class DayMetricsPublic(BaseModel):
    """One day's metrics (null without data) and whether each met its target (null without data)."""

    day: Day
    events: int
    drafts_shown: int
    accept_rate: float | None
    reject_rate: float | None
    edit_distance: float | None
    escalation_rate: float | None
    handle_time_s: float | None
    latency_p95_s: float | None
    hallucination_reports: int | None  # a count: 1, never 1.0 (the metric is a number of confirmed reports)
    cost_per_draft: float | None
    target_met: dict[str, bool | None] = Field(description="Per metric: met its target (null without data)")
    all_targets_met: bool | None
    updating: bool = Field(description="Events of this day arrived after its figures were computed; the next rebuild pass adds them")
    updating_since: dt.datetime | None = Field(description="When the oldest of those events was stored (null when not updating)")
    pending_events: int = Field(description="How many of the segment's events the figures leave out (0 when not updating)")


class StreakWindow(BaseModel):
    """Which days were counted: the pilot period up to today, or the requested range."""

    kind: Literal["pilot", "range"]
    start: Day | None
    end: Day | None


class MissedDay(BaseModel):
    """A business day with data on which some target was missed, and which."""

    day: Day
    targets: list[str]


class StreaksPublic(BaseModel):
    """Runs of business days on which every target was met (days without data skipped), with their scope."""

    window: StreakWindow
    segment: dict[str, str | None] = Field(description="The segment counted: intent, plan, agent_id (null: all)")
    scope: str
    current: int
    current_start: Day | None
    longest: int
    longest_start: Day | None
    longest_end: Day | None
    missed_days: list[MissedDay]


class StreaksReportPublic(BaseModel):
    """The streaks of the range and segment asked for, the production gate's, and the length it needs."""

    range: StreaksPublic
    gate: StreaksPublic
    needed: int


class AlertTransition(BaseModel):
    """A change of an alert's state on a day, with the window value that caused it."""

    day: Day
    from_: AlertState = Field(alias="from")
    to: AlertState
    value: float


class AlertStatusPublic(BaseModel):
    """One alert rule: its state, current window value, transitions and firing periods."""

    metric: str
    rule: str
    op: str
    threshold: float
    window: str
    days: int
    state: AlertState
    value: float | None
    last_evaluated: Day | None
    history: list[AlertTransition]
    firing_periods: list[tuple[Day, Day]] = Field(description="[first, last] day of each firing stretch")


class HallucinationReportPublic(PublicModel):
    """A hallucination report as filed (it counts once the lead confirms it)."""

    id: int
    event_id: str
    status: HallucinationStatus
    note: str
    reported_by: int | None = None
    minted_by: int | None = None  # the admin who minted the token it was filed with, when not the reporter's own
