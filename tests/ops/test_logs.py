"""JSON log lines, one per request with its id, and the id echoed in X-Request-ID."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.conftest import TEST_SECRET
from tests.ops.test_serving import free_port
from tests.waiting import wait_for
from webapp.ops.logs import ACCESS_LOGGER, JsonFormatter

DRAFTDESK = str(Path(sys.executable).with_name("draftdesk"))


def access_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == ACCESS_LOGGER]


def test_a_request_is_logged_with_its_id_from_the_header(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    r = client.get("/livez", headers={"X-Request-ID": "proxy-7f.3:a_b"})
    assert r.headers["X-Request-ID"] == "proxy-7f.3:a_b"
    (record,) = access_records(caplog)
    fields = json.loads(JsonFormatter().format(record))
    want = {"request_id": "proxy-7f.3:a_b", "method": "GET", "path": "/livez", "route": "/livez"}
    want |= {"status": 200, "level": "INFO", "logger": ACCESS_LOGGER}
    assert {k: fields[k] for k in want} == want
    assert isinstance(fields["duration_ms"], float) and fields["duration_ms"] >= 0
    assert fields["message"] == "GET /livez 200"


@pytest.mark.parametrize("given", [None, "", "has space", "x" * 129, "new\nline", "ünïcode"])
def test_a_missing_or_implausible_id_is_replaced_by_a_new_one(
    client: TestClient, caplog: pytest.LogCaptureFixture, given: str | None
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    headers: dict[str, Any] = {} if given is None else {"X-Request-ID": given.encode()}
    first = client.get("/no/such/page", headers=headers)
    second = client.get("/no/such/page", headers=headers)
    ids = [first.headers["X-Request-ID"], second.headers["X-Request-ID"]]
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids) and ids[0] != ids[1]
    logged = [(r.request_id, r.status, r.route) for r in access_records(caplog)]  # type: ignore[attr-defined]
    assert logged == [(ids[0], 404, "unmatched"), (ids[1], 404, "unmatched")]


def test_the_formatter_writes_one_json_object_with_extras_and_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("x").makeRecord("x", logging.ERROR, "f.py", 1, "failed %s", ("here",), sys.exc_info(), extra={"run": 7})
    line = JsonFormatter().format(record)
    assert "\n" not in line
    fields = json.loads(line)
    assert fields["message"] == "failed here" and fields["level"] == "ERROR" and fields["run"] == 7
    assert fields["exception"].startswith("Traceback") and "ValueError: boom" in fields["exception"]
    assert fields["time"].endswith("+00:00")


@pytest.mark.slow
def test_serve_writes_json_lines_to_stderr(tmp_path: Path, sqlite_template: Path) -> None:
    """The real command: uvicorn's own messages and the request line are JSON on stderr."""
    shutil.copyfile(sqlite_template, tmp_path / "serve.db")  # migrated already: serve starts at once
    port = free_port()
    env = {**os.environ, "DRAFTDESK_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}"}
    env |= {"DRAFTDESK_SECRET_KEY": TEST_SECRET, "DRAFTDESK_BACKUP_DIR": str(tmp_path / "backups")}
    stderr = tmp_path / "stderr.log"
    with stderr.open("wb") as err:
        proc = subprocess.Popen([DRAFTDESK, "serve", "--port", str(port), "--no-background"], env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            answers: list[httpx.Response] = []

            def answered() -> bool:
                try:
                    answers.append(httpx.get(f"http://127.0.0.1:{port}/livez", headers={"X-Request-ID": "e2e-1"}, timeout=2))
                except httpx.HTTPError:
                    assert proc.poll() is None, stderr.read_text()
                return bool(answers)

            wait_for(answered, timeout=120, what="draftdesk serve to answer /livez", interval=0.1)
            assert answers[0].headers["X-Request-ID"] == "e2e-1"
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    lines = [json.loads(line) for line in stderr.read_text().splitlines() if line.strip()]
    assert any(entry["logger"].startswith("uvicorn") for entry in lines)
    assert not any("color_message" in entry for entry in lines)
    (request,) = [e for e in lines if e.get("request_id") == "e2e-1"]
    assert (request["method"], request["path"], request["status"]) == ("GET", "/livez", 200)


def test_a_failing_request_is_logged_as_500_with_its_id(app: FastAPI, caplog: pytest.LogCaptureFixture) -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    app.add_api_route("/test-only/boom", boom)
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/test-only/boom", headers={"X-Request-ID": "fails-1"})
    assert r.status_code == 500
    (record,) = access_records(caplog)
    assert (record.request_id, record.status, record.route) == ("fails-1", 500, "/test-only/boom")  # type: ignore[attr-defined]
