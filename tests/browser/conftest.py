"""Browser fixtures live in tests/browser_support.py (registered by tests/conftest.py); the names below stay
importable from here for tests written against this module. `demo_server` serves a copy of the seeded demo."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser_support import CHROMIUM, CHROMIUM_ARGS, LiveServer, serve, sign_in
from tests.conftest import DemoTemplate

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "LiveServer", "sign_in"]


@pytest.fixture
def demo_server(tmp_path: Path, demo_template: DemoTemplate) -> Iterator[LiveServer]:
    """A live server over a copy of the seeded demo (SQLite), instead of seeding it per test."""
    with serve(demo_template.copy("sqlite", tmp_path)) as server:
        yield server
