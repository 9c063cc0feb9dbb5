"""Waiting on a condition instead of a fixed sleep: poll until it holds, fail with what was awaited after a timeout."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], *, timeout: float = 10.0, what: str = "the condition", interval: float = 0.01) -> None:
    """Return as soon as `condition()` is truthy; raise AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
