"""The one retry policy (tenacity): which failures are worth another attempt, and how long to wait.

Two callers share it. The evaluator's model client retries in process with tenacity's loop
(`webapp.evaluator.client`). Alert delivery keeps its schedule in the database instead, because a
message must survive a restart and is retried for up to 24 h (`webapp.alerts.delivery`): there
tenacity computes the wait before the next attempt (`wait_after`) and the outbox stores when that is.

Decision: "transient" is a 5xx, 408 (timeout), 409 (conflict), 425 (too early), 429 (rate
limited) or a failure to connect; any other status (3xx not followed, 4xx) is a request or
configuration error that the same request will meet again, so it is not retried.
"""

from __future__ import annotations

from collections.abc import Callable

from tenacity import RetryCallState, Retrying, wait_exponential, wait_random_exponential
from tenacity.wait import wait_base

TRANSIENT_4XX = frozenset({408, 409, 425, 429})

Wait = wait_base | Callable[[RetryCallState], float]


def is_transient_status(status: int) -> bool:
    """Tell whether an HTTP status is worth another attempt (5xx, 408, 409, 425, 429)."""
    return status >= 500 or status in TRANSIENT_4XX


class TransientError(Exception):
    """A failure worth another attempt; `retry_after` is the wait (seconds) the other side asked for, if any."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def backoff(*, base: float, cap: float) -> wait_base:
    """Return exponential backoff with "equal jitter": the n-th wait is in [step/2, step], step = min(cap, base * 2**(n-1)).

    Half of the step is fixed and half random, so waits keep growing while clients that failed
    together do not come back together.
    """
    return wait_exponential(multiplier=base / 2, max=cap / 2) + wait_random_exponential(multiplier=base / 2, max=cap / 2)


def asked_or(fallback: Wait, *, most: float | None = None) -> Callable[[RetryCallState], float]:
    """Return a wait that honours a TransientError's `retry_after` and otherwise uses `fallback`, capped at `most`."""

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = exc.retry_after if isinstance(exc, TransientError) else None
        seconds = asked if asked is not None else fallback(state)
        return seconds if most is None else min(seconds, most)

    return wait


def wait_after(strategy: Wait, attempt_number: int) -> float:
    """Return the wait `strategy` gives after the n-th failed attempt (for a schedule kept outside a retry loop)."""
    state = RetryCallState(Retrying(), None, (), {})
    state.attempt_number = attempt_number
    return float(strategy(state))
