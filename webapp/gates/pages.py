"""Launch-gate pages: the index of runs, each gate's report with evidence, and sign-off."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.db import SessionDep, stored_id
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc
from webapp.gates import service, views
from webapp.gates.report import to_markdown
from webapp.runs.deps import run_or_404
from webapp.runs.models import Run
from webapp.web.deps import SpecDep, require_role
from webapp.web.flash import consume_flash, flash_context, redirect_with_flash
from webapp.web.templating import render_view

router = APIRouter()
READERS = ("pm", "support_lead", "lead", "ml_lead", "admin")
SIGNERS = ("lead", "pm", "ml_lead")


@router.get("/gates", response_class=HTMLResponse)
def gates_index(request: Request, session: SessionDep, principal: Principal = Depends(require_role(*READERS))) -> HTMLResponse:
    """List runs with links to their pilot and production gate reports."""
    return render_view(request, "gates/index.html", views.gates_index_view(session=session))


def run_or_none(session: SessionDep, run: str | None = None) -> Run | None:
    """Return the run the query parameter `run` names (404 when it names none), or None without the parameter."""
    return None if run is None else run_or_404(session, run)


def newest_gate_url(*, session: Session, gate: str, format: str) -> str | None:
    """Return the gate page of the newest launch candidate (the gates index's first run), or None without runs."""
    runs = service.runs_for_gates(session=session)
    if not runs:
        return None
    return f"/gates/{gate}?run={quote(runs[0].name, safe='')}" + ("&format=markdown" if format == "markdown" else "")


@router.get("/gates/{gate}", response_class=HTMLResponse)
def gate_page(
    gate: Literal["pilot", "production"],
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    format: Literal["html", "markdown"] = "html",
    *, principal: Principal = Depends(require_role(*READERS)),
    run: Annotated[Run | None, Depends(run_or_none)],
) -> Response:
    """Show a gate report for a run: the verdict and what is missing on top, then every criterion.

    Without `?run=` (a bookmark, a typed URL) the newest run's report opens, as on the gates index,
    rather than a bare 422; with no run at all, the gates index ("No runs yet") explains how to add one.
    """
    if run is None:
        url = newest_gate_url(session=session, gate=gate, format=format)
        return RedirectResponse(url or "/gates", status_code=303)
    if format == "markdown":
        rep = service.report(session=session, spec=spec, gate=gate, run=run)
        return PlainTextResponse(to_markdown(rep, str(request.base_url).rstrip("/")), media_type="text/markdown")
    return _report_page(request, session, spec, gate=gate, run=run, principal=principal)


def _report_page(
    request: Request, session: Session, spec: EvalSpec, *, gate: str, run: Run, principal: Principal,
    error: str | None = None, status_code: int = 200,
) -> Response:
    """Render the gate report page (`error`: a message to show in place of the flash, e.g. a refused sign-off)."""
    flash = flash_context(request)
    view = views.gate_report_view(
        session=session, spec=spec, gate=gate, run=run, run_id=stored_id(run.id), user_id=principal.user_id,
        can_sign=principal.has_role(*SIGNERS), signoff_flash=flash["flash"], error=error if error is not None else flash["error"],
    )
    return consume_flash(request, render_view(request, "gates/report.html", view, status_code=status_code))


@router.post("/gates/{gate}/signoff")
def gate_signoff(
    gate: Literal["pilot", "production"],
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    run: Annotated[str, Form()],
    decision: Annotated[str, Form()],
    note: Annotated[str, Form()] = "",
    principal: Principal = Depends(require_role(*SIGNERS)),
) -> Response:
    """Sign the gate decision (go / no-go) with the report as it is now."""
    r = run_or_404(session, run)
    try:
        service.sign_off(session=session, spec=spec, gate=gate, run=r, principal=principal, decision=decision, note=note)
    except (service.SignoffConflict, service.FiguresUpdating) as exc:
        # 409 with the page itself: a replayed form or the loser of simultaneous posts sees who signed,
        # and a sign-off on figures still updating sees why it waits
        return _report_page(request, session, spec, gate=gate, run=r, principal=principal, error=str(exc), status_code=409)
    except service.GateError as exc:
        return redirect_with_flash(request, f"/gates/{gate}?run={quote(r.name)}", text=str(exc), kind="error")
    # The confirmation rides in the one-time signed flash (a reload does not repeat it), not in the URL.
    mine = next(x for x in service.signoffs(session=session, gate=gate, run_id=stored_id(r.id)) if x.user_id == principal.user_id)
    text = (
        f"Signed: your {'go' if mine.decision == 'go' else 'no-go'} on the {gate} gate for {r.name} is recorded "
        f"({as_utc(mine.signed_at):%Y-%m-%d %H:%M} UTC), with the report as it was then."
    )
    return redirect_with_flash(request, f"/gates/{gate}?run={quote(r.name)}#signoff", text=text)
