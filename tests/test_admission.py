"""webapp.admission: at most N requests of a server process run at once, admitted first come first served."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from webapp.admission import AdmissionLimit
from webapp.config import Settings
from webapp.main import create_app


class Recorder:
    """An ASGI app that records how many requests run at once and in which order they start."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.started: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        self.started.append(scope["path"])
        if not scope["path"].startswith(("/static/", "/healthz")):
            await self.release.wait()
        self.running -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def _request(app: Any, path: str) -> int:
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app({"type": "http", "path": path, "method": "GET", "headers": []}, receive, send)
    return status


def test_at_most_limit_run_at_once_and_the_rest_in_arrival_order() -> None:
    async def scenario() -> Recorder:
        inner = Recorder()
        app = AdmissionLimit(inner, limit=2)
        tasks = []
        for i in range(8):
            tasks.append(asyncio.create_task(_request(app, f"/page/{i}")))
            await asyncio.sleep(0)  # arrive one after the other
        await asyncio.sleep(0.01)
        assert inner.started == ["/page/0", "/page/1"]  # two admitted, six waiting
        # not counted: static files and the health check pass the queue
        assert await _request(app, "/healthz") == 200
        assert await _request(app, "/static/vendor/htmx.min.js") == 200
        inner.release.set()
        assert await asyncio.gather(*tasks) == [200] * 8
        return inner

    inner = asyncio.run(scenario())
    assert inner.most == 2 + 1  # the two pages, and one exempt request beside them
    pages = [p for p in inner.started if p.startswith("/page/")]
    assert pages == [f"/page/{i}" for i in range(8)]


def test_zero_means_no_limit() -> None:
    async def scenario() -> Recorder:
        inner = Recorder()
        app = AdmissionLimit(inner, limit=0)
        tasks = [asyncio.create_task(_request(app, f"/page/{i}")) for i in range(5)]
        await asyncio.sleep(0.01)
        assert inner.running == 5
        inner.release.set()
        await asyncio.gather(*tasks)
        return inner

    assert asyncio.run(scenario()).most == 5


def test_the_app_is_wrapped_with_the_configured_limit(monkeypatch: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'admission.db'}"
    assert Settings(mode="dev", database_url=url).max_concurrent_requests == 2
    monkeypatch.setenv("DRAFTDESK_MAX_CONCURRENT_REQUESTS", "3")
    app = create_app(Settings(mode="dev", database_url=url))
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
    stack = app.middleware_stack
    while stack is not None and not isinstance(stack, AdmissionLimit):
        stack = getattr(stack, "app", None)
    assert isinstance(stack, AdmissionLimit) and stack.limit == 3
