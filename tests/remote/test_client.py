"""The CI client's retries and settings: what is safe to retry is retried with backoff, the rest is final."""

from __future__ import annotations

import httpx
import pytest
from draftdesk_remote.client import Client, RemoteError, Target

TARGET = Target("http://127.0.0.1:9", "dd_secret_token")


def _client(answers: list[object], waits: list[float]) -> tuple[Client, list[str]]:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path} {request.headers['authorization']}")
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, httpx.Response)
        return answer

    return Client(TARGET, retries=3, sleep=waits.append, transport=httpx.MockTransport(handle)), seen


def test_gateway_errors_and_lost_connections_are_retried_with_backoff() -> None:
    waits: list[float] = []
    answers: list[object] = [httpx.Response(503), httpx.ConnectError("refused"), httpx.Response(502, headers={"Retry-After": "7"}),
                             httpx.Response(201, json={"name": "r"})]
    client, seen = _client(answers, waits)
    assert client.call("POST", "/runs", json={"name": "r"}) == (201, {"name": "r"})
    assert waits == [1.0, 2.0, 7.0] and client.retried == 3
    assert seen == ["POST /api/v1/runs Bearer dd_secret_token"] * 4


def test_retries_give_up_with_a_clear_error_and_other_answers_are_final() -> None:
    waits: list[float] = []
    client, _ = _client([httpx.ConnectError("refused")] * 4, waits)
    with pytest.raises(RemoteError, match=r"cannot reach http://127.0.0.1:9: ConnectError"):
        client.call("GET", "/runs")
    assert waits == [1.0, 2.0, 4.0]
    client, seen = _client([httpx.Response(409, json={"detail": "run 'r' exists with another commit"})], [])
    with pytest.raises(RemoteError, match="409: run 'r' exists with another commit") as info:
        client.call("POST", "/runs")
    assert len(seen) == 1 and "dd_secret_token" not in str(info.value)
    client, _ = _client([httpx.Response(401, json={"detail": "authentication required"})], [])
    with pytest.raises(RemoteError, match="the token was refused"):
        client.call("GET", "/runs")


def test_the_target_comes_from_options_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRAFTDESK_URL", raising=False)
    monkeypatch.delenv("DRAFTDESK_TOKEN", raising=False)
    with pytest.raises(RemoteError, match=r"set DRAFTDESK_URL \(or --url\) and DRAFTDESK_TOKEN \(or --token\)"):
        Target.resolve(None, None)
    monkeypatch.setenv("DRAFTDESK_URL", "https://dd.example.test/")
    monkeypatch.setenv("DRAFTDESK_TOKEN", "t")
    assert Target.resolve(None, None) == Target("https://dd.example.test", "t")
    assert Target.resolve("http://other.test", "u") == Target("http://other.test", "u")
    with pytest.raises(RemoteError, match="must start with http"):
        Target.resolve("dd.example.test", "t")
