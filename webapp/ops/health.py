"""`/livez` (the process answers) and `/healthz` (and it can reach its database), for a load balancer or an orchestrator.

Both answer without signing in: a load balancer, a container orchestrator or an uptime checker
holds no session or token, and the answers carry nothing private (a status, and on failure the
kind of database error, never its message, which may name hosts or users). A failing `/healthz`
should take the process out of rotation; a failing `/livez` should restart it. `/livez` touches
no database, so a database outage does not restart every process in a loop.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

router = APIRouter(include_in_schema=False)


@router.get("/livez")
async def livez() -> dict[str, str]:
    """Answer 200 while the process serves requests; no database, no login."""
    return {"status": "ok"}


@router.get("/healthz")
def healthz(request: Request) -> JSONResponse:
    """Answer 200 when `SELECT 1` runs on the database, else 503 with the reason; no login."""
    try:
        with request.app.state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError) as exc:
        reason = f"database unreachable ({type(exc).__name__})"
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
    return JSONResponse({"status": "ok"})
