"""Limits on request bodies: sizes per route (413, enforced by FastAPI while reading) and JSON nesting (422).

FastAPI's `max_body_size` (app-wide default, raised per route) checks Content-Length before
reading and counts the bytes as they arrive, so a body over its limit is never read whole and a
multipart upload stops streaming into its temporary file at the limit. `json_body_guard` then
refuses JSON bodies that nest deeper than safe_input.MAX_DEPTH, repeat a key, or hold a NUL or a
lone surrogate, before the route runs.
"""

from __future__ import annotations

from fastapi import HTTPException, Request

from webapp.core.safe_input import InputLimitError, JsonContentError, loads_json

MB = 1024 * 1024
DEFAULT_BODY_LIMIT = 1 * MB
EVENTS_BODY_LIMIT = 10 * MB
# The admin's import files may be up to 50 MB; the multipart envelope and form fields get 1 MB more.
UPLOAD_FILE_LIMIT = 50 * MB
UPLOAD_BODY_LIMIT = UPLOAD_FILE_LIMIT + MB

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def raw_json_body(request: Request) -> bytes:
    """Return the request body unparsed, for a route that validates the JSON bytes itself (POST /api/v1/events).

    json_body_guard leaves such a body to its route: POST /api/v1/events answers per event (a NUL in
    one event's text makes that event invalid, naming the field; the others are stored).
    """
    return await request.body()


def _takes_raw_body(request: Request) -> bool:
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    return dependant is not None and any(d.call is raw_json_body for d in dependant.dependencies)


async def json_body_guard(request: Request) -> None:
    """Refuse (422, naming the field) a JSON body nested too deep, with a key given twice, a NUL or a lone surrogate.

    One check for every JSON route (an app-wide dependency, which FastAPI runs before it validates
    the body against the route's model): FastAPI's own parse (json.loads) keeps the last of two equal
    keys and hands "\\ud800" through as a lone surrogate, a 500 once stored. The body's bytes (read
    once by Starlette and cached) are parsed again by safe_input.loads_json, which refuses all of them;
    a body that is not JSON at all is left to FastAPI's own 422.
    """
    if request.method not in _BODY_METHODS or _takes_raw_body(request):
        return
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json" and not ctype.endswith("+json"):
        return
    body = await request.body()
    if not body:
        return
    try:
        loads_json(body)
    except JsonContentError as exc:
        raise HTTPException(422, detail=[{"field": exc.field, "message": exc.reason}]) from exc
    except InputLimitError as exc:
        raise HTTPException(422, detail=[{"field": "(body)", "message": f"JSON {exc.message}"}]) from exc
    except ValueError:  # not JSON (or not UTF-8): the route's own parse answers it
        return
