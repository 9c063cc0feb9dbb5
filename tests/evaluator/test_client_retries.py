"""The model client's retries (tenacity, webapp.core.retry_policy) against the fake server; waits are recorded, never slept."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests.evaluator.fake_openai import FakeOpenAI
from webapp.evaluator.client import ChatClient, LlmCallError, LlmConfigError

MESSAGES = [{"role": "user", "content": "hi"}]


class Recorder:
    """A sleep that records how long it was asked to wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def ask(client: ChatClient) -> str:
    """Send one request through the client; return the answer's text."""

    async def go() -> str:
        try:
            answer = await client.complete(model="m", messages=MESSAGES, temperature=0, seed=None, sample_index=0)
            return answer.content
        finally:
            await client.close()

    return asyncio.run(go())


def client_for(url: str, **kwargs: object) -> tuple[ChatClient, Recorder]:
    """A client on `url` whose waits are recorded, never slept; and its recorder."""
    recorder = Recorder()
    return ChatClient(base_url=url, api_key="k", sleep=recorder, **kwargs), recorder  # type: ignore[arg-type]


def test_transient_errors_are_retried_with_backoff_and_retry_after(fake: FakeOpenAI) -> None:
    # a short Retry-After: the limiter holds every caller until then (a real wait, 50 ms)
    fake.script = [(503, {}), (502, {}), (429, {"Retry-After": "0.05"})]
    client, recorder = client_for(fake.base_url, backoff_base=2.0, backoff_cap=30.0)
    assert ask(client).startswith("Generated answer")
    assert (fake.by_kind["503"], fake.by_kind["502"], fake.by_kind["429"], fake.by_kind["generator"]) == (1, 1, 1, 1)
    # steps 2 s then 4 s, each wait in [half, whole] of its step; the 429 waits what it asked for
    assert len(recorder.waits) == 3
    assert 1.0 <= recorder.waits[0] <= 2.0 and 2.0 <= recorder.waits[1] <= 4.0
    assert recorder.waits[2] == 0.05
    assert client.stats.retries == 3 and client.stats.rate_limited == 1
    assert client.limiter.not_before > 0  # everyone waits out the rate limit
    assert client.stats.retries_waiting == 0


def test_gives_up_after_max_attempts_with_the_last_error(fake: FakeOpenAI) -> None:
    fake.script = [(500, {})] * 10
    client, recorder = client_for(fake.base_url, max_attempts=3)
    with pytest.raises(LlmCallError) as err:
        ask(client)
    assert str(err.value).startswith("HTTP 500: ") and str(err.value).endswith("scripted 500 (gave up after 3 attempts)")
    assert fake.by_kind["500"] == 3 and fake.by_kind["generator"] == 0
    assert len(recorder.waits) == 2  # no wait after the last attempt


@pytest.mark.parametrize("status", [400, 410, 422])
def test_a_permanent_error_is_not_retried(fake: FakeOpenAI, status: int) -> None:
    fake.script = [(status, {})]
    client, recorder = client_for(fake.base_url)
    with pytest.raises(LlmCallError) as err:
        ask(client)
    assert not isinstance(err.value, LlmConfigError)
    assert str(err.value).startswith(f"HTTP {status}")
    assert fake.by_kind[str(status)] == 1 and fake.by_kind["generator"] == 0
    assert recorder.waits == []


def test_a_refused_key_is_not_retried_and_stops_later_calls(fake: FakeOpenAI) -> None:
    fake.script = [(403, {})]
    client, recorder = client_for(fake.base_url)
    with pytest.raises(LlmConfigError, match="HTTP 403.*check OPENAI_API_KEY"):
        ask(client)
    with pytest.raises(LlmConfigError):
        ask(client)
    assert fake.by_kind["403"] == 1 and fake.calls == 1 and recorder.waits == []


def test_a_server_that_is_not_there_is_retried_then_given_up() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: connections are refused
    client, recorder = client_for(f"http://127.0.0.1:{port}/v1", max_attempts=2, timeout=5.0)
    with pytest.raises(LlmCallError, match=r"APIConnectionError.*\(gave up after 2 attempts\)"):
        ask(client)
    assert len(recorder.waits) == 1
