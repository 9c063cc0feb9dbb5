"""Start the real OpenID provider (tests/oidc_provider/provider.mjs, npm oidc-provider) on a free loopback port."""

from __future__ import annotations

import json
import select
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.browser_support import free_port

SCRIPT = Path(__file__).resolve().parent / "provider.mjs"
ROOT = SCRIPT.parents[2]
START_SECONDS = 20


@dataclass(frozen=True)
class Client:
    """A client registered at the provider."""

    client_id: str
    client_secret: str
    redirect_uris: list[str]


@contextmanager
def oidc_provider(*, clients: list[Client], accounts: dict[str, dict[str, object]]) -> Iterator[str]:
    """Run the provider while the block runs; yield its issuer URL."""
    port = free_port()
    options = {"port": port, "clients": [c.__dict__ for c in clients], "accounts": accounts}
    proc = subprocess.Popen(
        ["node", str(SCRIPT), json.dumps(options)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        started, _, _ = select.select([proc.stdout], [], [], START_SECONDS)  # bounded: never wait on a silent process
        line = proc.stdout.readline() if started else ""  # "ready <issuer>" once it listens ("" if it died)
        assert line.startswith("ready "), f"the OpenID provider did not start within {START_SECONDS} s (exit {proc.poll()})"
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
