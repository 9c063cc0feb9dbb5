"""What an incoming event must be: the validated model, its field errors, and the columns stored per event.

The API (webapp/metrics/ingest.py) and the import (webapp/metrics/bulkload.py) validate with this
one model, so both accept exactly the same events.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal, cast

import Levenshtein
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from webapp.metrics.models import ALL

MAX_BATCH = 1000
# PostgreSQL cannot store the NUL character in text, so it is refused on both databases (a
# pattern checked by pydantic's compiled validator; the message is rewritten in validation_errors).
NO_NUL = r"^[^\x00]*$"
NUL_REASON = "must not contain the NUL character (\\u0000)"
# A day inside the datetime range on both sides, so that the UTC time and the calendar day in any
# time zone exist (a time within a day of year 1 or 9999 would overflow when converted).
EARLIEST = dt.datetime(1, 1, 2, tzinfo=dt.UTC)
LATEST = dt.datetime(9999, 12, 30, tzinfo=dt.UTC)
# The sane window (issue 33): an event before 2000 or more than a day ahead of the clock is a broken
# clock or a typo, never a real ticket; one such event used to drag every reader's history back to
# its day (year 364: 600,000 days, refused by every range check, so / and /metrics answered 422).
# A day of slack ahead of the server's clock covers clocks that run fast and any time zone.
WINDOW_START = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
FUTURE_SLACK = dt.timedelta(days=1)

Name = Annotated[str, Field(min_length=1, max_length=200, pattern=NO_NUL)]
Label = Annotated[str | None, Field(default=None, max_length=100, pattern=NO_NUL)]
Version = Annotated[str | None, Field(default=None, max_length=200, pattern=NO_NUL)]
Text = Annotated[str | None, Field(default=None, pattern=NO_NUL)]


class EventIn(BaseModel):
    """One production event as the drafting tool reports it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, str_strip_whitespace=False)

    event_id: Name
    ticket_id: Name
    occurred_at: Annotated[AwareDatetime, Field(ge=EARLIEST, le=LATEST)]
    intent: Label = None
    plan: Label = None
    agent_id: Label = None
    model_version: Version = None
    prompt_version: Version = None
    draft_shown: bool
    action: Literal["accept", "edit", "reject", "escalate"] | None = None
    draft_text: Text = None
    sent_text: Text = None
    customer_message: Text = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    latency_ms: float | None = Field(default=None, ge=0)
    handle_time_s: float | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    escalated: bool

    @field_validator("intent", "plan", "agent_id")
    @classmethod
    def _not_wildcard(cls, v: str | None) -> str | None:
        if v == ALL:
            raise ValueError(f"'{ALL}' is reserved (it means every value in filters)")
        return v

    @model_validator(mode="after")
    def _action_needs_shown_draft(self) -> EventIn:
        if self.action is not None and not self.draft_shown:
            raise ValueError("action: must be null when draft_shown is false (no draft to act on)")
        return self


@dataclass(frozen=True, slots=True)
class FieldError:
    field: str
    reason: str


def validation_errors(exc: ValidationError, *, skip: int = 0) -> list[FieldError]:
    """Turn a pydantic error into (field, reason) pairs; `skip` drops leading location parts (a list index)."""
    out = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"][skip:])
        msg = err["msg"]
        if err["type"] == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == NO_NUL:
            msg = NUL_REASON
        elif not field and msg.startswith("Value error, ") and ":" in msg:
            # model-level rules name their field at the start of the message
            field, _, msg = msg[len("Value error, ") :].partition(": ")
        out.append(FieldError(field or "(event)", msg.removeprefix("Value error, ")))
    return out


class EventWindow:
    """The instants an event may occur at: in the sane window, and on a day the retention watermark left open.

    Built once per batch or import (`now` is the time of receipt, `pruned_before` the stored
    watermark); `error` is two comparisons per event, so it runs in the validation loop of the API
    and of the import alike. Refusals name the field `occurred_at`, the value and the bound.
    """

    __slots__ = ("latest", "lowest", "pruned_before", "tz", "watermark_start")

    def __init__(self, *, now: dt.datetime, tz: dt.tzinfo, pruned_before: dt.date | None = None) -> None:
        self.latest = now + FUTURE_SLACK
        self.tz = tz
        self.pruned_before = pruned_before
        # the first instant of the watermark's day in the spec's time zone: an event is on an earlier
        # day exactly when it occurred before this instant
        self.watermark_start = (
            None if pruned_before is None else dt.datetime.combine(pruned_before, dt.time(0), tzinfo=tz)
        )
        self.lowest = WINDOW_START if self.watermark_start is None else max(WINDOW_START, self.watermark_start)

    def error(self, occurred: dt.datetime) -> FieldError | None:
        """Return why an event that occurred at `occurred` is refused, or None when it is accepted."""
        if occurred < self.lowest:
            if occurred < WINDOW_START:
                return window_error(occurred, now=self.latest - FUTURE_SLACK)
            day = occurred.astimezone(self.tz).date()
            return FieldError(
                "occurred_at",
                f"{occurred.isoformat()} is on {day}, before the retention watermark {self.pruned_before}: "
                "the events of earlier days were pruned and their daily figures are final",
            )
        if occurred > self.latest:
            return window_error(occurred, now=self.latest - FUTURE_SLACK)
        return None


def window_error(occurred: dt.datetime, *, now: dt.datetime) -> FieldError | None:
    """Return why `occurred` is outside the sane window [2000-01-01T00:00Z, now + 1 day], or None."""
    if occurred < WINDOW_START:
        return FieldError(
            "occurred_at", f"{occurred.isoformat()} is before 2000-01-01T00:00:00Z (events are accepted from 2000 on)"
        )
    if occurred > now + FUTURE_SLACK:
        return FieldError(
            "occurred_at",
            f"{occurred.isoformat()} is more than one day after the server's time {now.replace(microsecond=0).isoformat()}",
        )
    return None


def normalized_edit_distance(draft: str, sent: str) -> float:
    """Return Levenshtein distance / length of the longer text; 0 when both are empty."""
    longest = max(len(draft), len(sent))
    if longest == 0:
        return 0.0
    return Levenshtein.distance(draft, sent) / longest


# The stored columns of an event, in insert order: the validated fields as sent, then the edit
# distance and the times computed at ingestion.
MODEL_COLUMNS: tuple[str, ...] = (
    "event_id", "ticket_id", "intent", "plan", "agent_id", "model_version", "prompt_version", "draft_shown",
    "action", "draft_text", "sent_text", "customer_message", "confidence", "latency_ms", "handle_time_s",
    "cost_usd", "escalated",
)  # fmt: skip
EVENT_COLUMNS: tuple[str, ...] = (*MODEL_COLUMNS, "edit_distance", "occurred_at", "day", "received_at")
_model_values = operator.itemgetter(*MODEL_COLUMNS)
DAY_POS = EVENT_COLUMNS.index("day")
EDIT_DISTANCE_POS = EVENT_COLUMNS.index("edit_distance")
OCCURRED_POS = EVENT_COLUMNS.index("occurred_at")


# A stored event in EVENT_COLUMNS order, as the inserts and COPY write it (values of mixed types:
# text, numbers, flags, the occurred and received times, the day).
EventRow = tuple[object, ...]


def event_row(fields: Mapping[str, object], tz: dt.tzinfo, received: dt.datetime) -> EventRow:
    """Return the stored row of a validated event (`EventIn.__dict__`) in EVENT_COLUMNS order.

    The edit distance and the calendar day (in the spec's time zone) are computed here, for the
    API and the import alike; `occurred_at` keeps the offset it was sent with.
    """
    # the fields as EventIn validated them
    draft, sent = cast(str | None, fields["draft_text"]), cast(str | None, fields["sent_text"])
    ed = normalized_edit_distance(draft, sent) if draft is not None and sent is not None else None
    occurred = cast(dt.datetime, fields["occurred_at"])
    return (*_model_values(fields), ed, occurred, occurred.astimezone(tz).date(), received)
