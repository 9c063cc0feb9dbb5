"""Limits on request bodies: sizes per route (413, enforced by FastAPI while reading) and JSON nesting (422).

FastAPI's `max_body_size` (app-wide default, raised per route) checks Content-Length before
reading and counts the bytes as they arrive, so a body over its limit is never read whole and a
multipart upload stops streaming into its temporary file at the limit. `json_depth_guard` then
refuses JSON bodies that nest deeper than safe_input.MAX_DEPTH before the route runs.
"""

from __future__ import annotations

from fastapi import HTTPException, Request

from webapp.core.safe_input import InputLimitError, check_depth

MB = 1024 * 1024
DEFAULT_BODY_LIMIT = 1 * MB
EVENTS_BODY_LIMIT = 10 * MB
# The admin's import files may be up to 50 MB; the multipart envelope and form fields get 1 MB more.
UPLOAD_FILE_LIMIT = 50 * MB
UPLOAD_BODY_LIMIT = UPLOAD_FILE_LIMIT + MB

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def raw_json_body(request: Request) -> bytes:
    """Return the request body unparsed, for a route that validates the JSON bytes itself.

    Such a route must bound the nesting depth itself (json_depth_guard skips it rather than parse
    the body a second time): POST /api/v1/events validates with a fixed-depth model and parses a
    body that fails it with safe_input.loads_json.
    """
    return await request.body()


def _takes_raw_body(request: Request) -> bool:
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    return dependant is not None and any(d.call is raw_json_body for d in dependant.dependencies)


async def json_depth_guard(request: Request) -> None:
    """Refuse (422) a JSON request body nested deeper than MAX_DEPTH levels."""
    if request.method not in _BODY_METHODS or _takes_raw_body(request):
        return
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json" and not ctype.endswith("+json"):
        return
    try:
        # Routes with a body have parsed it already (FastAPI answers 400 when it cannot) and
        # Starlette hands back that same value; a route without a body ignores what was sent.
        value = await request.json()
    except (ValueError, RecursionError):
        return
    try:
        check_depth(value)
    except InputLimitError as exc:
        raise HTTPException(422, detail=[{"field": "(body)", "message": f"JSON {exc.message}"}]) from exc
