"""Limits on request bodies: one size per route family (413 naming the limit) and JSON nesting (422).

`FAMILIES` is the one table of body sizes, by path (issue 41: a 12 MB KB body was accepted under
the admin uploads' 50 MB). `BodyLimits`, an ASGI middleware, picks a request's family from its
path, refuses a declared Content-Length over the family's limit at the first read, and counts
the bytes as they arrive, so a body over its limit is never read whole and a multipart upload
stops streaming into its temporary file at the limit. The refusal is an HTTPException(413) raised
inside the app, so the app's own handlers answer: JSON `{"detail": ...}` under /api/, the error
page otherwise, both naming the family and its limit. `json_body_guard` then refuses JSON bodies
that nest deeper than safe_input.MAX_DEPTH, repeat a key, or hold a NUL or a lone surrogate, before
the route runs.

Decisions (docs/security.md, "Request bodies: one limit per route family"): families go by path
prefix, so routes added later (the pipeline's drafts and datasets, the KB's remote articles and
sync) fall into one without a word; bulk data (imports, datasets, KB, a run's drafts) is one family
at 10 MB, the events ingest its own (10 MB, and 1,000 events), HTML forms 256 kB (the longest
is a reference response or a note), and every other API body 1 MB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from webapp.core.safe_input import InputLimitError, JsonContentError, loads_json

KB_ = 1024
MB = 1024 * KB_


@dataclass(frozen=True)
class BodyFamily:
    """Routes whose bodies share one size limit: a name, the limit and the paths (full regex matches)."""

    name: str
    limit: int
    paths: tuple[str, ...]
    what: str  # what the family is, as the docs and the 413 say it

    def matches(self, path: str) -> bool:
        return any(re.fullmatch(p, path) for p in self.paths)

    @property
    def limit_text(self) -> str:
        return f"{self.limit // MB} MB" if self.limit % MB == 0 else f"{self.limit // KB_} kB"


# First match wins; the last family matches every path.
FAMILIES: tuple[BodyFamily, ...] = (
    BodyFamily("events", 10 * MB, (r"/api/v1/events",), "the events ingest"),
    BodyFamily(
        "bulk",
        10 * MB,
        (r"/admin/imports/.*", r"/api/v1/kb(/.*)?", r"/api/v1/datasets(/.*)?", r"/api/v1/runs/[^/]+/drafts(/.*)?"),
        "imports, datasets, KB articles and a run's drafts",
    ),
    BodyFamily("forms", 256 * KB_, (r"(?!/api/).*",), "a page's form"),
    BodyFamily("api", 1 * MB, (r".*",), "a JSON API call"),
)


def family_for(path: str) -> BodyFamily:
    """Return the body family of a request path."""
    return next(f for f in FAMILIES if f.matches(path))


def limit_for(path: str) -> int:
    """Return the body size limit of a request path, in bytes."""
    return family_for(path).limit


DEFAULT_BODY_LIMIT = family_for("/api/v1/other").limit
FORM_BODY_LIMIT = family_for("/other").limit
EVENTS_BODY_LIMIT = family_for("/api/v1/events").limit
BULK_BODY_LIMIT = family_for("/api/v1/kb/articles").limit
# An import's file is checked against the same figure: the body, envelope included, meets it first.
UPLOAD_FILE_LIMIT = UPLOAD_BODY_LIMIT = family_for("/admin/imports/kb").limit


class BodyTooLarge(HTTPException):
    """A request body over its family's limit (413), naming the limit."""

    def __init__(self, family: BodyFamily) -> None:
        super().__init__(
            413, detail=f"request body: larger than the {family.limit_text} limit for {family.what} ({family.name})"
        )


class BodyLimits:
    """ASGI middleware: hold each request body to its family's limit (FAMILIES)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        family = family_for(scope["path"])
        declared = _content_length(scope)
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            if declared is not None and declared > family.limit:
                raise BodyTooLarge(family)
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > family.limit:
                    raise BodyTooLarge(family)
            return message

        await self.app(scope, limited, send)


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", ()):
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


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
