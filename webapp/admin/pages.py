"""Admin pages: users, API tokens, and imports by upload (KB, dataset, drafts)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, File, Form, HTTPException, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session

from webapp.admin import audit_pages, service, views
from webapp.auth import service as auth_service
from webapp.auth.service import AuthError, Principal
from webapp.core.db import SessionDep
from webapp.datasets import service as datasets_service
from webapp.datasets.records import RecordError
from webapp.kb import sync as kb_sync
from webapp.runs import hooks as runs_hooks
from webapp.web.deps import SpecDep, require_role
from webapp.web.flash import consume_flash, flash_context, redirect_with_flash
from webapp.web.request_limits import UPLOAD_FILE_LIMIT
from webapp.web.templating import render_view

router = APIRouter()
router.include_router(audit_pages.router)  # /admin/audit and its CSV
Admin = Annotated[Principal, Depends(require_role("admin"))]
MAX_UPLOAD_BYTES = UPLOAD_FILE_LIMIT


@router.get("/admin", response_class=HTMLResponse, name="admin_home")
def admin_home(request: Request, session: SessionDep, principal: Admin) -> HTMLResponse:
    """Show what the admin looks after, with links to each task."""
    return render_view(request, "admin/index.html", views.AdminHomeView(overview=service.overview(session=session)))


# --- users ------------------------------------------------------------------------------------------


def _users_page(
    request: Request, session: Session, *, error: str | None = None, form: views.UserForm | None = None,
    flash: str | None = None, status_code: int = 200,
) -> HTMLResponse:
    view = views.users_view(session=session, error=error, form=form, flash=flash)
    return render_view(request, "admin/users.html", view, status_code=status_code)


@router.get("/admin/users", response_class=HTMLResponse, name="admin_users")
def admin_users(request: Request, session: SessionDep, principal: Admin) -> Response:
    """List users with their roles; a form creates one."""
    return consume_flash(request, _users_page(request, session, flash=flash_context(request)["flash"]))


@router.post("/admin/users", response_class=HTMLResponse)
def admin_users_create(
    request: Request,
    session: SessionDep,
    principal: Admin,
    email: Annotated[str, Form()] = "",
    name: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    role: Annotated[list[str] | None, Form()] = None,
) -> Response:
    """Create a user with roles and a first password."""
    try:
        user = auth_service.create_user(session=session, email=email, password=password, roles=role or [], name=name)
    except AuthError as exc:
        session.rollback()
        form = views.UserForm(email=email, name=name, roles=tuple(role or ()))
        return _users_page(request, session, error=str(exc), form=form, status_code=400)
    return redirect_with_flash(request, "/admin/users", text=f"Created {user.email}.")


@router.post("/admin/users/{user_id}/active", response_class=HTMLResponse)
def admin_users_active(
    request: Request, user_id: int, session: SessionDep, principal: Admin, active: Annotated[str, Form()] = "0"
) -> Response:
    """Deactivate (active=0) or reactivate (active=1) a user."""
    try:
        user = service.set_user_active(
            session=session, user_id=user_id, active=active == "1", acting_user_id=principal.user_id
        )
    except AuthError as exc:
        session.rollback()
        return _users_page(request, session, error=str(exc), status_code=400)
    state = "reactivated" if user.is_active else "deactivated (signed out everywhere)"
    return redirect_with_flash(request, "/admin/users", text=f"{user.email} {state}.")


@router.post("/admin/users/{user_id}/roles", response_class=HTMLResponse)
def admin_users_roles(
    request: Request, user_id: int, session: SessionDep, principal: Admin, role: Annotated[list[str] | None, Form()] = None
) -> Response:
    """Set the roles an admin grants a user (roles from the identity provider's claim stay)."""
    try:
        user = service.set_admin_roles(session=session, user_id=user_id, roles=role or [], acting_user_id=principal.user_id)
    except AuthError as exc:
        session.rollback()
        return _users_page(request, session, error=str(exc), status_code=400)
    granted = ", ".join(sorted(role or [])) or "no role"
    return redirect_with_flash(request, "/admin/users", text=f"{user.email}: granted {granted}.")


# --- API tokens -------------------------------------------------------------------------------------

REVEAL_COOKIE = "dd_token_reveal"
REVEAL_SECONDS = 120


def _tokens_page(
    request: Request, session: Session, *, error: str | None = None, form: views.TokenForm | None = None,
    flash: str | None = None, status_code: int = 200,
) -> HTMLResponse:
    view = views.tokens_view(session=session, error=error, form=form, flash=flash)
    return render_view(request, "admin/tokens.html", view, status_code=status_code)


@router.get("/admin/tokens", response_class=HTMLResponse, name="admin_tokens")
def admin_tokens(request: Request, session: SessionDep, principal: Admin) -> Response:
    """List API tokens by prefix; a form creates one."""
    return consume_flash(request, _tokens_page(request, session, flash=flash_context(request)["flash"]))


@router.post("/admin/tokens", response_class=HTMLResponse)
def admin_tokens_create(
    request: Request,
    session: SessionDep,
    principal: Admin,
    email: Annotated[str, Form()] = "",
    name: Annotated[str, Form()] = "",
    scope: Annotated[list[str] | None, Form()] = None,
) -> Response:
    """Create a token, then redirect to the page that shows it once (it is stored only as a hash)."""
    form = views.TokenForm(email=email, name=name, scopes=tuple(scope or ()))
    user = auth_service.get_user_by_email(session=session, email=email)
    if user is None:
        return _tokens_page(request, session, error=f"email: no user {email!r}", form=form, status_code=400)
    try:
        token, plain = auth_service.create_token(
            session=session, user=user, name=name, scopes=scope or None, created_by=principal.user_id
        )
    except AuthError as exc:
        session.rollback()
        return _tokens_page(request, session, error=str(exc), form=form, status_code=400)
    # Post-redirect-get: the plain token rides to the result page once, in a short-lived HttpOnly
    # cookie scoped to that page, so a reload cannot create a second token and the server never
    # stores the plain text (only its hash).
    target = f"/admin/tokens/{token.id}/created"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        REVEAL_COOKIE, plain, max_age=REVEAL_SECONDS, path=target, httponly=True, samesite="strict",
        secure=request.app.state.settings.cookie_secure,
    )
    return response


@router.get("/admin/tokens/{token_id}/created", response_class=HTMLResponse)
def admin_token_created(request: Request, token_id: int, session: SessionDep, principal: Admin) -> HTMLResponse:
    """Show a new token's plain text once; a reload shows that it was already revealed."""
    found = auth_service.token_with_owner(session=session, token_id=token_id)
    if found is None:
        raise HTTPException(status_code=404, detail=f"no token with id {token_id}")
    token, owner = found
    plain = request.cookies.get(REVEAL_COOKIE, "")
    revealed = plain if plain and auth_service.sha256_hex(plain) == token.token_hash else None
    response = render_view(request, "admin/token_created.html", views.TokenCreatedView(token=token, plain=revealed, owner=owner))
    response.headers["Cache-Control"] = "no-store"  # the plain token must not linger in caches
    response.delete_cookie(REVEAL_COOKIE, path=f"/admin/tokens/{token_id}/created")
    return response


@router.post("/admin/tokens/{token_id}/revoke", response_class=HTMLResponse)
def admin_tokens_revoke(request: Request, token_id: int, session: SessionDep, principal: Admin) -> Response:
    """Revoke an API token."""
    try:
        token = auth_service.revoke_token(session=session, token_id=token_id)
    except AuthError as exc:
        return _tokens_page(request, session, error=str(exc), status_code=404)
    return redirect_with_flash(request, "/admin/tokens", text=f"Token {token.prefix}… revoked; it stops working at once.")


# --- imports ----------------------------------------------------------------------------------------


@router.get("/admin/imports", response_class=HTMLResponse, name="admin_imports")
def admin_imports(request: Request, session: SessionDep, principal: Admin) -> HTMLResponse:
    """Show the upload forms for the KB, a dataset, and a run's drafts."""
    return render_view(request, "admin/imports.html", views.imports_view(session=session))


async def _read_upload(upload: UploadFile | None) -> tuple[bytes, str]:
    if upload is None or not upload.filename:
        raise RecordError("choose a file to upload")
    data = await upload.read(MAX_UPLOAD_BYTES + 1)
    if len(data) > MAX_UPLOAD_BYTES:
        raise RecordError(f"the file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB", path=upload.filename)
    return data, upload.filename


def _import_failed(request: Request, session: Session, kind: str, exc: RecordError) -> HTMLResponse:
    session.rollback()  # nothing of the file is kept
    view = views.ImportErrorView(kind=kind, error=exc, location=exc.location)
    return render_view(request, "admin/import_error.html", view, status_code=400)


def _import_done(
    request: Request, kind: str, message: str, link: str | None, created: bool = True, *, warnings: list[str] | None = None
) -> HTMLResponse:
    view = views.ImportDoneView(kind=kind, message=message, link=link, created=created, warnings=warnings or [])
    return render_view(request, "admin/import_done.html", view)


@router.post("/admin/imports/kb", response_class=HTMLResponse)
async def admin_import_kb(
    request: Request, session: SessionDep, principal: Admin, file: Annotated[UploadFile | None, File()] = None
) -> HTMLResponse:
    """Import a KB file (all-or-nothing)."""
    try:
        data, filename = await _read_upload(file)
        result = kb_sync.import_kb(session=session, data=data, path=filename)
    except RecordError as exc:
        return _import_failed(request, session, "KB", exc)
    return _import_done(request, "KB", f"{filename}: {result.summary}", "/kb")


@router.post("/admin/imports/dataset", response_class=HTMLResponse)
async def admin_import_dataset(
    request: Request,
    session: SessionDep,
    principal: Admin,
    spec: SpecDep,
    file: Annotated[UploadFile | None, File()] = None,
    name: Annotated[str, Form()] = "",
) -> HTMLResponse:
    """Import a dataset file (all-or-nothing; identical file: nothing to do; changed file: new version)."""
    try:
        data, filename = await _read_upload(file)
        result = datasets_service.import_dataset(
            session=session, data=data, path=filename, name=name.strip() or None, spec=spec
        )
    except RecordError as exc:
        return _import_failed(request, session, "dataset", exc)
    return _import_done(
        request, "dataset", result.message, f"/datasets/{result.dataset.id}", result.created, warnings=result.warnings
    )


@router.post("/admin/imports/drafts", response_class=HTMLResponse)
async def admin_import_drafts(
    request: Request,
    session: SessionDep,
    principal: Admin,
    file: Annotated[UploadFile | None, File()] = None,
    run: Annotated[str, Form()] = "",
    dataset: Annotated[str, Form()] = "",
    model: Annotated[str, Form()] = "",
    prompt_version: Annotated[str, Form()] = "",
) -> HTMLResponse:
    """Import a run's drafts (all-or-nothing)."""
    try:
        data, filename = await _read_upload(file)
        result = runs_hooks.import_drafts(
            session=session,
            data=data,
            path=filename,
            run_name=run,
            dataset=dataset.strip() or None,
            model=model.strip() or None,
            prompt_version=prompt_version.strip() or None,
        )
    except RecordError as exc:
        return _import_failed(request, session, "drafts", exc)
    return _import_done(request, "drafts", result.summary, f"/runs/{quote(result.run.name, safe='')}")
