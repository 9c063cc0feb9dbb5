"""Admission: at most N requests of one server process run at a time; the others wait their turn.

Why: a route's Python work holds the interpreter lock, so requests running side by side in one
process do not go faster, they take turns every few milliseconds. With 25 requests at once in a
worker, a grader's save that holds SQLite's write lock (webapp.grading.writes) waited for the
interpreter lock behind 24 others and held the database lock many times longer than its work;
meanwhile the waiting requests held database connections (the pool ran dry). Queued here
instead, before any thread or connection is taken, requests wait in arrival order (asyncio's
semaphore wakes waiters first in, first out) and the ones admitted finish quickly.

Static files and the health check are not counted: they hold no lock and no connection.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Receive, Scope, Send

_EXEMPT = ("/static/", "/healthz")


class AdmissionLimit:
    """Let at most `limit` HTTP requests of this process run at once (0: no limit), first come first served."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit
        self._slots: asyncio.Semaphore | None = None  # made in the server's event loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.limit <= 0 or scope["type"] != "http" or scope["path"].startswith(_EXEMPT):
            await self.app(scope, receive, send)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        async with self._slots:
            await self.app(scope, receive, send)
