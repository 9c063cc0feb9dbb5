"""Structured logs: one JSON object per line on stderr, and one line per request with its id.

The formatter is ours (about 30 lines) rather than a dependency: it writes the time (UTC, ISO
8601), level, logger, message, every `extra=` field, and the traceback of an exception. `serve`
hands `logging_config()` to uvicorn, which applies it in each worker process, so uvicorn's own
messages come out as JSON too; uvicorn's text access log is off and `RequestLog` writes the
request lines instead (logger `draftdesk.access`).

Request ids: the `X-Request-ID` header of the request when it is a plausible id (1-128 letters,
digits, `-`, `_`, `.`, `:`), so a proxy's id follows the request through; otherwise a new one.
The id is in the log line and echoed in the response's `X-Request-ID` header.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import time
import uuid
from collections.abc import Callable

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ACCESS_LOGGER = "draftdesk.access"
REQUEST_ID_HEADER = "X-Request-ID"
_PLAUSIBLE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# The attributes every LogRecord has: anything else on a record came from `extra=` (uvicorn's
# color_message is its message again with terminal colours).
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName", "color_message"}


class JsonFormatter(logging.Formatter):
    """Format a record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update((k, v) for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_"))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def logging_config(*, access_log: bool = True, level: str = "INFO") -> dict[str, object]:
    """Return the dictConfig that `serve` gives uvicorn: JSON lines on stderr for every logger."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            "uvicorn.access": {"handlers": [], "propagate": False},
            ACCESS_LOGGER: {"level": "INFO" if access_log else "WARNING"},
        },
    }


def request_id_from(scope: Scope) -> str:
    """Return the request's X-Request-ID when plausible, else a new random id."""
    for key, value in scope.get("headers", ()):
        if key == b"x-request-id":
            text = value.decode("latin-1")
            if _PLAUSIBLE_ID.fullmatch(text):
                return text
    return uuid.uuid4().hex


# observe(method, route, status, seconds): what the Prometheus counters take from each request
Observe = Callable[[str, str, int, float], None]


class RequestLog:
    """Log each HTTP request (method, path, route, status, duration, id) and echo its id; call `observe` too.

    A plain ASGI middleware, outermost, so the duration covers everything the app does.
    `observe(method, route, status, seconds)` is how the Prometheus counters see each request.
    """

    def __init__(self, app: ASGIApp, *, observe: Observe | None = None) -> None:
        self.app = app
        self.observe = observe
        self.log = logging.getLogger(ACCESS_LOGGER)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_from(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500  # unless the app starts a response
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = route_template(scope)
            if self.observe is not None:
                self.observe(scope["method"], route, status, seconds)
            if self.log.isEnabledFor(logging.INFO):  # the extra fields are built only when they are written
                self.log.info(
                    "%s %s %s",
                    scope["method"],
                    scope["path"],
                    status,
                    extra={
                        "request_id": request_id,
                        "method": scope["method"],
                        "path": scope["path"],
                        "route": route,
                        "status": status,
                        "duration_ms": round(seconds * 1000, 2),
                    },
                )


def route_template(scope: Scope) -> str:
    """Return the matched route's path template (`/runs/{run}`), `/static` for static files, else `unmatched`.

    Templates, not paths, keep the metrics' label values few (a path holds ids).
    """
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    if scope.get("path", "").startswith("/static/"):
        return "/static"
    return "unmatched"
