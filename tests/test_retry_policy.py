"""The shared retry policy: what is transient, the backoff's bounds, Retry-After, and a tenacity loop with it (no sleeping)."""

from __future__ import annotations

import random

import pytest
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt

from webapp.core.retry_policy import TransientError, asked_or, backoff, is_transient_status, wait_after


def test_transient_statuses() -> None:
    transient = [500, 502, 503, 599, 408, 409, 425, 429]
    permanent = [400, 401, 403, 404, 410, 422, 301, 302]
    assert [s for s in transient + permanent if is_transient_status(s)] == transient


def test_backoff_doubles_from_base_up_to_cap_with_equal_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    strategy = backoff(base=30.0, cap=3600.0)
    # steps worked out by hand: 30, 60, 120, 240, 480, 960, 1920, then capped at 3600
    steps = [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]
    monkeypatch.setattr(random, "uniform", lambda low, high: low)  # the jitter at its low end: half the step
    assert [wait_after(strategy, n) for n in range(1, 10)] == [s / 2 for s in steps]
    monkeypatch.setattr(random, "uniform", lambda low, high: high)  # and at its high end: the whole step
    assert [wait_after(strategy, n) for n in range(1, 10)] == steps
    monkeypatch.undo()
    for n, step in enumerate(steps, start=1):
        waits = {wait_after(strategy, n) for _ in range(50)}
        assert all(step / 2 <= w <= step for w in waits)
        assert len(waits) > 1  # jittered


def test_retry_after_is_honoured_and_capped() -> None:
    recorded: list[float] = []
    answers = iter([TransientError("busy", retry_after=7.0), TransientError("busy", retry_after=500.0), TransientError("down")])

    def call() -> str:
        answer = next(answers, None)
        if answer is not None:
            raise answer
        return "ok"

    retrying = Retrying(
        stop=stop_after_attempt(5),
        wait=asked_or(backoff(base=2.0, cap=2.0), most=120.0),
        retry=retry_if_exception_type(TransientError),
        sleep=recorded.append,
    )
    assert retrying(call) == "ok"
    assert recorded[:2] == [7.0, 120.0] and 1.0 <= recorded[2] <= 2.0


def test_gives_up_after_n_attempts_and_never_retries_a_permanent_error() -> None:
    recorded: list[float] = []
    calls: list[str] = []

    def transient() -> None:
        calls.append("t")
        raise TransientError("HTTP 503")

    def permanent() -> None:
        calls.append("p")
        raise ValueError("HTTP 400")

    retrying = Retrying(stop=stop_after_attempt(3), wait=backoff(base=1.0, cap=8.0), retry=retry_if_exception_type(TransientError),
                        sleep=recorded.append)
    with pytest.raises(RetryError) as err:
        retrying(transient)
    assert str(err.value.last_attempt.exception()) == "HTTP 503" and err.value.last_attempt.attempt_number == 3
    assert calls == ["t", "t", "t"] and len(recorded) == 2
    with pytest.raises(ValueError, match="HTTP 400"):
        retrying(permanent)
    assert calls[3:] == ["p"] and len(recorded) == 2
