"""JSON API: event ingestion, daily metrics, alerts, hallucination reports."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request
from fastapi.responses import Response
from pydantic import TypeAdapter

from webapp.app import flows
from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.metrics import alert_states, ingest
from webapp.metrics import daily as metrics_daily
from webapp.metrics import reports as metrics_reports
from webapp.metrics import streaks as metrics_streaks
from webapp.metrics.event_input import MAX_BATCH, EventIn
from webapp.metrics.schemas import (
    AlertStatusPublic,
    DayMetricsPublic,
    HallucinationReportPublic,
    IngestPublic,
    StreaksReportPublic,
)
from webapp.web.deps import SpecDep, require_role, require_scope
from webapp.web.request_limits import EVENTS_BODY_LIMIT, raw_json_body

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
    max_body_size=EVENTS_BODY_LIMIT,
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
    flows.after_ingest(session=session, spec=spec, background=settings.background_jobs or settings.separate_jobs)
    return Response(ingest.answer_json(results), media_type="application/json")


# Serializes the daily objects in one compiled call (FastAPI's generic encoder took 10 ms of the
# 180-day response's ~25 ms).
_DAYS_JSON = TypeAdapter(list[dict[str, Any]])


@router.get("/metrics/daily", response_model=list[DayMetricsPublic])
def get_daily_metrics(
    session: SessionDep,
    spec: SpecDep,
    start: dt.date,
    end: dt.date,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
    principal: Principal = Depends(require_role(*READERS)),
) -> Response:
    """Return one object per day of [start, end] with every metric and whether it met its target."""
    try:
        days = metrics_daily.daily_metrics(
            session=session, spec=spec, start=start, end=end, intent=intent, plan=plan, agent_id=agent_id
        )
    except metrics_daily.MetricsError as exc:
        raise HTTPException(422, detail=[{"field": "end", "message": str(exc)}]) from exc
    return Response(_DAYS_JSON.dump_json([d.as_dict() for d in days]), media_type="application/json")


@router.get("/metrics/streaks", response_model=StreaksReportPublic)
def get_streaks(
    session: SessionDep,
    spec: SpecDep,
    start: dt.date | None = Query(None, description="default: six weeks before end"),
    end: dt.date | None = Query(None, description="default: the last day with events"),
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
    principal: Principal = Depends(require_role(*READERS)),
) -> dict[str, Any]:
    """Return the business-day streaks of the range and segment, and the production gate's (pilot window, all traffic)."""
    try:
        s, e = metrics_daily.default_range(session=session, spec=spec, start=start, end=end)
        streaks = metrics_streaks.business_day_streaks(
            session=session, spec=spec, start=s, end=e, intent=intent, plan=plan, agent_id=agent_id
        )
    except metrics_daily.MetricsError as exc:
        raise HTTPException(422, detail=[{"field": "end", "message": str(exc)}]) from exc
    return {
        "range": streaks.as_dict(),
        "gate": metrics_streaks.pilot_streaks(session=session, spec=spec).as_dict(),
        "needed": spec.gates.production.consecutive_business_days,
    }


@router.get("/alerts", response_model=list[AlertStatusPublic])
def get_alerts(
    session: SessionDep,
    spec: SpecDep,
    end: dt.date | None = Query(None, description="evaluate up to this day (default: last day with events)"),
    principal: Principal = Depends(require_role(*READERS)),
) -> list[dict[str, Any]]:
    """List every alert with its state, current window value, transitions and firing periods."""
    return [a.as_dict() for a in alert_states.alerts(session=session, spec=spec, end=end)]


@router.post("/events/{event_id}/hallucination-reports", status_code=201, response_model=HallucinationReportPublic)
def post_hallucination_report(
    event_id: str,
    session: SessionDep,
    payload: dict[str, Any] = Body(default_factory=dict),
    principal: Principal = Depends(require_scope("ingest")),
) -> dict[str, Any]:
    """Flag a factual error on an event; it counts once the lead confirms it."""
    note = payload.get("note", "")
    if not isinstance(note, str):
        raise HTTPException(422, detail=[{"field": "note", "message": "must be a string"}])
    citations = payload.get("citations")
    if citations is not None and not (
        isinstance(citations, list)
        and all(isinstance(c, dict) and isinstance(c.get("article_id"), str) and (c.get("revision") is None or isinstance(c.get("revision"), int)) for c in citations)
    ):
        raise HTTPException(
            422, detail=[{"field": "citations", "message": "must be a list of {article_id: text, revision: whole number}"}]
        )
    try:
        report = metrics_reports.report_hallucination(
            session=session, event_id=event_id, note=note, reported_by=principal.user_id,
            citations=[{"article_id": c["article_id"], "revision": c.get("revision")} for c in citations] if citations else None,
        )
    except metrics_daily.MetricsError as exc:
        raise HTTPException(404, detail=str(exc)) from exc
    return {"id": report.id, "event_id": report.event_id, "status": report.status, "note": report.note}
