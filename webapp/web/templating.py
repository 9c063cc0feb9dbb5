"""Jinja environment, htmx detection, and rendering a page or one of its blocks as a fragment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import Field, fields
from typing import ClassVar, Protocol

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import StrictUndefined, pass_context
from jinja2.runtime import Context

from webapp.core import units
from webapp.core.config import ASSET_ROOT
from webapp.core.labels import humanize
from webapp.core.security import csrf_token
from webapp.web import links
from webapp.web.navigation import current_href, nav_for


def _context(request: Request) -> dict[str, object]:
    principal = getattr(request.state, "principal", None)
    nav = nav_for(principal, request.app) if principal else []
    return {
        "principal": principal,
        "nav": nav,
        "nav_current": current_href(nav, request.url.path),
        "csrf_token": csrf_token(request),
        "spec": request.app.state.spec,
        "current_path": request.url.path,
    }


templates = Jinja2Templates(directory=str(ASSET_ROOT / "templates"), context_processors=[_context])
# Templates are code: a restart loads edits. Checking every template's file time on every render
# was about 4% of the grading page's server time.
templates.env.auto_reload = False
# Tests render with StrictUndefined (tests/conftest.py sets DRAFTDESK_STRICT_TEMPLATES=1 before the app
# is imported): a name a template reads that its view lacks fails the test instead of rendering as
# empty text. Production keeps Jinja's default: the tests are where a renamed field is caught, and a
# reader is better served a page with an empty spot than a 500.
STRICT_ENV = "DRAFTDESK_STRICT_TEMPLATES"
if os.environ.get(STRICT_ENV) == "1":
    templates.env.undefined = StrictUndefined
templates.env.globals["roles_label"] = {
    "labeler": "Labeler",
    "lead": "Team lead",
    "pm": "PM",
    "support_lead": "Support lead",
    "ml_lead": "ML lead",
    "admin": "Admin",
}


@pass_context
def _can_open(context: Context, href: str) -> bool:
    """Tell a template whether its viewer may open `href` (the route's own role check decides)."""
    request: Request = context["request"]
    return links.can_open(request.app, context.get("principal"), href)


templates.env.globals["can_open"] = _can_open


def _fmt_pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value * 100:.{digits}f}%"


def _fmt_num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


templates.env.filters["pct"] = _fmt_pct
templates.env.filters["num"] = _fmt_num
# one format per metric (webapp/core/units.py): {{ value|metric("accept_rate") }}, {{ change|delta }}
templates.env.filters["metric"] = lambda value, name: units.text(name, value)
templates.env.filters["delta"] = units.delta
templates.env.filters["score_delta"] = units.score_delta
templates.env.filters["human"] = humanize


def is_htmx(request: Request) -> bool:
    """Tell whether the request came from htmx and wants a fragment (a history restore wants the full page)."""
    return request.headers.get("hx-request") == "true" and request.headers.get("hx-history-restore-request") != "true"


def render(
    request: Request,
    name: str,
    context: Mapping[str, object] | None = None,
    *,
    block: str | None = None,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """Render a page; for an htmx request with `block`, render only that block of the same template.

    A page that answers both ways says so with `Vary: HX-Request`, so no cache hands the fragment
    to a full page load (or the page to htmx).
    """
    context = dict(context or {})
    if block:
        headers = {**(headers or {})}
        vary = [v.strip() for v in headers.get("Vary", "").split(",") if v.strip()]
        headers["Vary"] = ", ".join(dict.fromkeys([*vary, "HX-Request"]))
    if block and is_htmx(request):
        template = templates.env.get_template(name)
        ctx = template.new_context({**_context(request), "request": request, **context})
        html = "".join(template.blocks[block](ctx))
        return HTMLResponse(html, status_code=status_code, headers=headers)
    return templates.TemplateResponse(request, name, context, status_code=status_code, headers=headers)


class DataclassView(Protocol):
    """A page's view model: any dataclass instance."""

    __dataclass_fields__: ClassVar[dict[str, Field[object]]]


def render_view(
    request: Request,
    name: str,
    view: DataclassView,
    *,
    block: str | None = None,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
    constants: Mapping[str, object] | None = None,
) -> HTMLResponse:
    """Render a page from its one typed view model (a dataclass): the template reads the view's fields by name.

    The one way a view reaches a template (every page calls it). `constants`: module-level names a
    template also reads (keyboard shortcuts, the criteria's keys), the same for every view.
    """
    return render(request, name, {**(constants or {}), **view_names(view)}, block=block, status_code=status_code, headers=headers)


def view_names(*views: DataclassView) -> dict[str, object]:
    """Return the template's names of one or more views: their fields, by name (a later view's win)."""
    return {f.name: getattr(v, f.name) for v in views for f in fields(v)}
