"""Browser tests: a real uvicorn server on loopback and Debian's Chromium driven by Playwright.

`live_server` serves the app on a free 127.0.0.1 port over a fresh SQLite database (with the
full schema). `seed_live(fn)` runs fn(session) against that database before the test drives
the page. `browser_page` is a Playwright page whose console errors are collected in
`page.console_errors` (tests assert it stays empty).
"""

from __future__ import annotations

import datetime as dt
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
import uvicorn
from sqlmodel import Session

from tests.conftest import SPEC_PATH, TEST_SECRET
from tests.factories import DEFAULT_PASSWORD
from tests.waiting import wait_for
from webapp.app.main import create_app
from webapp.core.config import Settings
from webapp.core.db import make_engine

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-gpu", "--disable-component-update", "--no-first-run"]


def free_port() -> int:
    """Return a free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveServer:
    url: str
    db_url: str

    def seed(self, fn: Callable[[Session], object]) -> object:
        engine = make_engine(self.db_url)
        try:
            with Session(engine, expire_on_commit=False) as session:
                result = fn(session)
                session.commit()
                return result
        finally:
            engine.dispose()


@pytest.fixture
def live_server(tmp_path: Path, sqlite_template: Path) -> Iterator[LiveServer]:
    db = tmp_path / "live.db"
    shutil.copyfile(sqlite_template, db)
    with serve(f"sqlite:///{db}") as server:
        yield server


@contextmanager
def serve(
    db_url: str, *, mode: Literal["dev", "production"] = "dev", port: int | None = None,
    clock: Callable[[], dt.datetime] | None = None, **settings_: Any,
) -> Iterator[LiveServer]:
    """Serve the app over `db_url` on a loopback port (free unless given) while the block runs.

    `mode`: production marks cookies Secure; `clock`: the time requests are judged at (app.state.clock);
    `settings_`: further Settings fields (e.g. the identity provider's).
    """
    settings = Settings(database_url=db_url, mode=mode, secret_key=TEST_SECRET, spec=SPEC_PATH, **settings_)
    app = create_app(settings)
    if clock is not None:
        app.state.clock = clock
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=15, what="the live server to start", interval=0.05)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", db_url)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        app.state.engine.dispose()


@pytest.fixture
def browser() -> Iterator[object]:
    """A Chromium per test: Playwright's sync API runs an event loop in this thread while it is
    open, and a session-wide one would break every later test that calls asyncio.run()."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def new_page(browser) -> Iterator[Callable[[], object]]:  # type: ignore[no-untyped-def]
    """Factory of fresh pages (each its own browser context, so its own cookies)."""
    contexts = []

    def _make():  # type: ignore[no-untyped-def]
        ctx = browser.new_context(viewport={"width": 1360, "height": 900})
        contexts.append(ctx)
        page = ctx.new_page()
        page.console_errors = []  # type: ignore[attr-defined]
        page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))  # type: ignore[attr-defined]
        page.on("pageerror", lambda e: page.console_errors.append(str(e)))  # type: ignore[attr-defined]
        return page

    yield _make
    for ctx in contexts:
        ctx.close()


def sign_in(page, base_url: str, email: str, password: str = DEFAULT_PASSWORD) -> None:  # type: ignore[no-untyped-def]
    """Sign in through the login form."""
    page.goto(f"{base_url}/login")
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login" not in url)


def wait_until(page, expression: str, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """Poll a JS expression until it is truthy. Pages forbid eval (CSP), which page.wait_for_function needs;
    page.evaluate runs through the DevTools protocol instead and is not subject to the page's policy."""
    wait_for(lambda: page.evaluate(expression), timeout=timeout_s, what=expression, interval=0.05)
