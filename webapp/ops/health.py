"""`/livez` (the process answers) and `/healthz` (and it can reach its database, and how its jobs do), for a load balancer or an orchestrator.

Both answer without signing in: a load balancer, a container orchestrator or an uptime checker
holds no session or token, and the answers carry nothing private (a status, and on failure the
kind of database error, never its message, which may name hosts or users). A failing `/healthz`
should take the process out of rotation; a failing `/livez` should restart it. `/livez` touches
no database, so a database outage does not restart every process in a loop.

Jobs (issue 33): `/healthz` names every background job that has recorded a pass (job_run) with
`ok` or `stalled` (no success for three of its periods, webapp/ops/jobruns.py), and its status is
`degraded` while one is stalled. Decision: a stalled job still answers 200, because the pages
work without it and taking the only process out of rotation would stop the graders too; a
monitor that reads only status codes asks `/healthz?strict=true`, which answers 503 while a job
is stalled. Prometheus has the same facts as `draftdesk_job_last_success_timestamp_seconds`.

Reactions (issue 42): while a reaction to a fact has failed and not yet succeeded on its retry,
`/healthz` lists it under `reactions_failing` (with how many facts wait for it) and is `degraded`
(503 with strict=true), for the same reason as a stalled job; Prometheus has
`draftdesk_reaction_failing_facts{reaction}` and `draftdesk_facts_pending`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session

from webapp.core import reactions
from webapp.core.timeutil import utcnow
from webapp.ops import jobruns

router = APIRouter(include_in_schema=False)


@router.get("/livez")
async def livez() -> dict[str, str]:
    """Answer 200 while the process serves requests; no database, no login."""
    return {"status": "ok"}


@router.get("/healthz")
def healthz(request: Request, strict: bool = False) -> JSONResponse:
    """Answer 200 when the database answers (degraded while a job is stalled; 503 then if strict), else 503 with the reason; no login."""
    try:
        with Session(request.app.state.engine) as session:
            session.execute(text("SELECT 1"))
            states = jobruns.job_states(session=session, now=utcnow())
            failing = reactions.failing(session=session)
    except (SQLAlchemyError, OSError) as exc:
        reason = f"database unreachable ({type(exc).__name__})"
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
    body: dict[str, object] = {"status": "ok"}
    if states:
        body["jobs"] = {s.job: "stalled" if s.stalled else "ok" for s in states}
    stalled = [s.job for s in states if s.stalled]
    reasons = [f"no success for {jobruns.STALL_PERIODS} periods: {', '.join(stalled)}"] if stalled else []
    if failing:
        # the reaction's name and how many facts wait for its retry; its error is in the log and fact_reaction
        body["reactions_failing"] = {f.reaction: f.facts for f in failing}
        reasons.append("reactions failing (retried): " + ", ".join(f.reaction for f in failing))
    if reasons:
        body["status"] = "degraded"
        body["reason"] = "; ".join(reasons)
    return JSONResponse(body, status_code=503 if reasons and strict else 200)
