"""The HTTP side of the CI client: one httpx client with the token, retries with backoff, clear errors.

Retries are safe because every call it makes is idempotent on the server (the same run, the same
drafts and the same KB text again change nothing): a connection error, a timeout and a 502, 503 or
504 are retried up to `retries` times, waiting 1, 2, 4, 8... seconds (or the server's Retry-After,
at most 30 s). Any other answer is final.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

RETRY_STATUSES = frozenset({502, 503, 504})
EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2  # as `draftdesk check`; 2: usage, connection or a refused request
DEFAULT_RETRIES = 5
MAX_WAIT_S = 30.0


class RemoteError(Exception):
    """The call failed for good: no connection, or an answer that is not what was asked (exit code 2)."""

    def __init__(self, message: str, *, status: int | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Target:
    """Where the server is and the token to call it with (from --url/--token or DRAFTDESK_URL/DRAFTDESK_TOKEN)."""

    url: str
    token: str

    @classmethod
    def resolve(cls, url: str | None, token: str | None) -> Target:
        """Return the target from the options, else the environment; raise RemoteError naming what is missing."""
        url = (url or os.environ.get("DRAFTDESK_URL") or "").strip()
        token = (token or os.environ.get("DRAFTDESK_TOKEN") or "").strip()
        missing = [n for n, v in (("DRAFTDESK_URL (or --url)", url), ("DRAFTDESK_TOKEN (or --token)", token)) if not v]
        if missing:
            raise RemoteError(f"set {' and '.join(missing)}: the Draft Desk server and a `ci` token")
        if not url.startswith(("http://", "https://")):
            raise RemoteError(f"DRAFTDESK_URL must start with http:// or https://, not {url[:40]!r}")
        return cls(url.rstrip("/"), token)


def _detail(response: httpx.Response) -> Any:
    try:
        return response.json().get("detail")
    except (ValueError, AttributeError):
        return response.text[:500]


def _wait(attempt: int, response: httpx.Response | None) -> float:
    after = response.headers.get("retry-after") if response is not None else None
    if after and after.isdigit():
        return min(float(after), MAX_WAIT_S)
    return min(2.0**attempt, MAX_WAIT_S)


class Client:
    """A Draft Desk API client for CI; `call` answers the JSON body of a 2xx answer or raises RemoteError."""

    def __init__(
        self, target: Target, *, retries: int = DEFAULT_RETRIES, timeout: float = 60.0,
        sleep: Callable[[float], None] = time.sleep, transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.target = target
        self.retries = retries
        self.sleep = sleep
        self.retried = 0
        self.http = httpx.Client(
            base_url=f"{target.url}/api/v1",
            headers={"Authorization": f"Bearer {target.token}", "User-Agent": "draftdesk-remote/0.1"},
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def call(self, method: str, path: str, *, json: Any = None, params: dict[str, str] | None = None) -> tuple[int, Any]:
        """Make the call, retrying what is safe to retry; return (status, JSON body) of a 2xx answer."""
        for attempt in range(self.retries + 1):
            response: httpx.Response | None = None
            try:
                response = self.http.request(method, path, json=json, params=params)
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise RemoteError(f"cannot reach {self.target.url}: {type(exc).__name__}: {exc}") from None
            else:
                if response.status_code not in RETRY_STATUSES:
                    break
                if attempt == self.retries:
                    raise RemoteError(f"{method} {path}: the server answered {response.status_code} {self.retries + 1} times",
                                      status=response.status_code)
            self.retried += 1
            self.sleep(_wait(attempt, response))
        assert response is not None
        if response.is_success:
            return response.status_code, response.json()
        detail = _detail(response)
        body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if response.status_code == 401:
            message = "the token was refused (401): check DRAFTDESK_TOKEN"
        elif response.status_code == 403:
            message = f"the token may not do this (403): {detail}"
        elif isinstance(detail, list):
            total = body.get("errors_total") or len(detail)
            message = f"{method} {path}: {response.status_code}: {total} bad record(s), nothing stored"
        else:
            message = f"{method} {path}: {response.status_code}: {detail}"
        raise RemoteError(message, status=response.status_code, detail=detail)
