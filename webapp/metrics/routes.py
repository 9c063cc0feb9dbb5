"""JSON API: event ingestion, daily metrics, alerts, hallucination reports."""

from __future__ import annotations

import datetime as dt

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, ValidationError

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.metrics import alert_states, ingest, stale
from webapp.metrics import daily as metrics_daily
from webapp.metrics import reports as metrics_reports
from webapp.metrics import streaks as metrics_streaks
from webapp.metrics.aggregates import SEGMENT_DIMS
from webapp.metrics.event_input import MAX_BATCH, EventIn
from webapp.metrics.schemas import (
    AlertStatusPublic,
    AlertTransition,
    DayMetricsPublic,
    HallucinationReportPublic,
    IngestPublic,
    MissedDay,
    StreaksPublic,
    StreaksReportPublic,
    StreakWindow,
)
from webapp.web.deps import SpecDep, require_role, require_scope
from webapp.web.request_limits import raw_json_body

router = APIRouter(tags=["metrics"])

READERS = ("support_lead", "pm", "lead", "admin")


# The request body as documented: FastAPI does not parse it (the route validates the raw bytes
# in one compiled call), so the schema is declared here, from the model the route validates with.
_EVENTS_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "array",
                "maxItems": MAX_BATCH,
                "items": EventIn.model_json_schema(),
                "description": f"Up to {MAX_BATCH} events",
            }
        }
    },
}


@router.post(
    "/events",
    summary="Send production events",
    description=(
        "The agents' drafting tool (an `ingest` token) sends a batch of up to 1,000 events (draft shown, "
        "sent, edited, escalated...); each is answered created, duplicate or invalid with its field and "
        "reason."
    ),
    response_model=IngestPublic,
    openapi_extra={"requestBody": _EVENTS_BODY},
)
def post_events(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(require_scope("ingest")),
    body: bytes = Depends(raw_json_body),
) -> Response:
    """Store a batch of up to 1000 events; answer created, duplicate or invalid (field and reason) per event."""
    try:
        results = ingest.ingest_body(session=session, spec=spec, body=body)
    except ingest.BatchError as exc:
        raise HTTPException(exc.status, detail=[{"field": exc.field, "message": exc.message}]) from exc
    settings = request.app.state.settings
    stale.after_ingest(session=session, spec=spec, background=settings.background_jobs or settings.separate_jobs)
    return Response(ingest.answer_json(results), media_type="application/json")


def _iso(day: dt.date | None) -> str | None:
    return day.isoformat() if day else None


def day_public(d: metrics_daily.DayMetrics) -> DayMetricsPublic:
    """Return a day's metrics as the API shows them."""
    return DayMetricsPublic(
        day=d.day.isoformat(), events=d.events, drafts_shown=d.drafts_shown,
        accept_rate=d.accept_rate, reject_rate=d.reject_rate, edit_distance=d.edit_distance,
        escalation_rate=d.escalation_rate, handle_time_s=d.handle_time_s, latency_p95_s=d.latency_p95_s,
        hallucination_reports=d.hallucination_reports, cost_per_draft=d.cost_per_draft,
        target_met=dict(d.target_met), all_targets_met=d.all_targets_met, updating=d.updating,
        updating_since=d.updating_since, pending_events=d.pending_events,
    )


# FastAPI serializes the models to JSON in one pydantic call (its `dump_json` path); the hand-made
# TypeAdapter over dicts this replaced was there for FastAPI's older generic encoder.
@router.get(
    "/metrics/daily",
    summary="Read the daily pilot metrics",
    description=(
        "The support lead, the PM and leads read one object per day of [start, end] with every online "
        "metric and whether it met its target."
    ),
    response_model=list[DayMetricsPublic],
)
def get_daily_metrics(
    session: SessionDep,
    spec: SpecDep,
    start: dt.date,
    end: dt.date,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
    principal: Principal = Depends(require_role(*READERS)),
) -> list[DayMetricsPublic]:
    """Return one object per day of [start, end] with every metric and whether it met its target."""
    try:
        days = metrics_daily.daily_metrics(
            session=session, spec=spec, start=start, end=end, intent=intent, plan=plan, agent_id=agent_id
        )
    except metrics_daily.MetricsError as exc:
        raise HTTPException(422, detail=[{"field": "end", "message": str(exc)}]) from exc
    return [day_public(d) for d in days]


@router.get(
    "/metrics/streaks",
    summary="Read the metrics' streaks",
    description=(
        "The support lead and the PM read the business-day streaks of a range and segment, and the "
        "production gate's streak (pilot window, all traffic)."
    ),
    response_model=StreaksReportPublic,
)
def get_streaks(
    session: SessionDep,
    spec: SpecDep,
    start: dt.date | None = Query(None, description="default: six weeks before end"),
    end: dt.date | None = Query(None, description="default: the last day with events"),
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
    principal: Principal = Depends(require_role(*READERS)),
) -> StreaksReportPublic:
    """Return the business-day streaks of the range and segment, and the production gate's (pilot window, all traffic)."""
    try:
        s, e = metrics_daily.default_range(session=session, spec=spec, start=start, end=end)
        streaks = metrics_streaks.business_day_streaks(
            session=session, spec=spec, start=s, end=e, intent=intent, plan=plan, agent_id=agent_id
        )
    except metrics_daily.MetricsError as exc:
        raise HTTPException(422, detail=[{"field": "end", "message": str(exc)}]) from exc
    return StreaksReportPublic(
        range=streaks_public(streaks),
        gate=streaks_public(metrics_streaks.pilot_streaks(session=session, spec=spec)),
        needed=spec.gates.production.consecutive_business_days,
    )


def streaks_public(s: metrics_streaks.Streaks) -> StreaksPublic:
    """Return business-day streaks as the API shows them."""
    return StreaksPublic(
        window=StreakWindow(kind="pilot" if s.window == "pilot" else "range", start=_iso(s.window_start), end=_iso(s.window_end)),
        segment={k: s.segment.get(k) for k in SEGMENT_DIMS}, scope=s.scope_text,
        current=s.current, current_start=_iso(s.current_start),
        longest=s.longest, longest_start=_iso(s.longest_start), longest_end=_iso(s.longest_end),
        missed_days=[MissedDay(day=d.isoformat(), targets=ms) for d, ms in s.missed],
    )


@router.get(
    "/alerts",
    summary="List the metric alerts",
    description=(
        "The support lead, the PM and leads list every alert with its state, current window value, "
        "transitions and firing periods."
    ),
    response_model=list[AlertStatusPublic],
)
def get_alerts(
    session: SessionDep,
    spec: SpecDep,
    end: dt.date | None = Query(None, description="evaluate up to this day (default: last day with events)"),
    principal: Principal = Depends(require_role(*READERS)),
) -> list[AlertStatusPublic]:
    """List every alert with its state, current window value, transitions and firing periods."""
    return [alert_public(a) for a in alert_states.alerts(session=session, spec=spec, end=end)]


def alert_public(a: alert_states.AlertStatus) -> AlertStatusPublic:
    """Return an alert's state as the API shows it."""
    return AlertStatusPublic(
        metric=a.metric, rule=a.describe(), op=a.rule.op, threshold=a.threshold, window=a.rule.window, days=a.rule.days,
        state=a.state, value=a.value, last_evaluated=_iso(a.last_evaluated),
        history=[AlertTransition.model_validate({"day": t.day.isoformat(), "from": t.from_state, "to": t.to_state, "value": t.value})
                 for t in a.history],
        firing_periods=[(x.isoformat(), y.isoformat()) for x, y in a.firing_periods],
    )


class CitationIn(BaseModel):
    """A KB article the reported draft cited (the revision it cited, when known)."""

    article_id: str = Field(strict=True)
    revision: int | None = Field(None, strict=True)


class HallucinationReportIn(BaseModel):
    """A hallucination report: what is wrong, and the KB articles the draft cited."""

    note: str = Field("", strict=True)
    citations: list[CitationIn] | None = None


def _report_in(payload: dict[str, object]) -> HallucinationReportIn:
    """Read the body; a wrong field is a 422 naming it (note, or citations)."""
    try:
        return HallucinationReportIn.model_validate(payload)
    except ValidationError as exc:
        field = str(exc.errors()[0]["loc"][0]) if exc.errors() and exc.errors()[0]["loc"] else "(body)"
        message = "must be a string" if field == "note" else "must be a list of {article_id: text, revision: whole number}"
        raise HTTPException(422, detail=[{"field": field, "message": message}]) from None


@router.post(
    "/events/{event_id}/hallucination-reports",
    summary="Flag a factual error in a draft",
    description=(
        "An agent's drafting tool (an `ingest` token) flags a factual error on a production event; it "
        "counts in the hallucination rate once the lead confirms it."
    ),
    status_code=201,
    response_model=HallucinationReportPublic,
)
def post_hallucination_report(
    event_id: str,
    session: SessionDep,
    payload: dict[str, object] = Body(default_factory=dict),
    principal: Principal = Depends(require_scope("ingest")),
) -> HallucinationReportPublic:
    """Flag a factual error on an event; it counts once the lead confirms it."""
    body = _report_in(payload)
    try:
        report = metrics_reports.report_hallucination(
            session=session, event_id=event_id, note=body.note, reported_by=principal.user_id, minted_by=principal.minted_by,
            citations=[{"article_id": c.article_id, "revision": c.revision} for c in body.citations] if body.citations else None,
        )
    except metrics_daily.MetricsError as exc:
        raise HTTPException(404, detail=str(exc)) from exc
    return HallucinationReportPublic.of(report)
