"""Start the real OpenID provider (tests/oidc_provider/provider.mjs, npm oidc-provider) on a free loopback port."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.browser_support import free_port
from tests.waiting import wait_for

SCRIPT = Path(__file__).resolve().parent / "provider.mjs"
ROOT = SCRIPT.parents[2]


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
        line = proc.stdout.readline()  # "ready <issuer>" once it listens (or "" if it died)
        wait_for(lambda: line.startswith("ready ") or proc.poll() is not None, timeout=20, what="the OpenID provider to start")
        assert line.startswith("ready "), f"the OpenID provider did not start (exit {proc.poll()})"
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
