"""The API's CI verdict (issue 40): the same function, text and exit code as `draftdesk check RUN`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.checks.conftest import CURRENT_3001, World, drafts_a, escalation, good
from tests.factories import make_dataset

ROOT = Path(__file__).resolve().parents[2]
RUN = {"name": "ci-7", "dataset": "eval", "model_version": "m", "commit": "c0ffee"}


def _cli_check(db_url: str, run: str) -> tuple[int, str]:
    """Run `draftdesk check RUN` as the operator would, on the same database; return its exit code and output."""
    env = {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_MODE": "dev", "COLUMNS": "80"}
    proc = subprocess.run(
        [sys.executable, "-c", "from webapp.app.cli import main; main()", "check", run],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    return proc.returncode, proc.stdout


def _push(ci: TestClient, drafts: list[dict[str, object]], name: str = "ci-7", dataset: str = "eval") -> None:
    assert ci.post("/api/v1/runs", json={**RUN, "name": name, "dataset": dataset}).status_code == 201
    assert ci.post(f"/api/v1/runs/{name}/drafts", json=drafts).status_code == 201


class TestVerdict:
    def test_complete_gives_the_verdict_draftdesk_check_gives(
        self, world: World, api_as: Callable[..., TestClient], db_url: str
    ) -> None:
        ci = api_as(scopes=["ci"])
        _push(ci, drafts_a())
        assert ci.get("/api/v1/runs/ci-7/checks").status_code == 404  # never checked yet
        done = ci.post("/api/v1/runs/ci-7/complete")
        assert done.status_code == 200, done.text
        body = done.json()
        assert (body["verdict"], body["exit_code"]) == ("fail", 1)
        assert body["reasons"] == [
            "6/8 examples of the eval set pass every automated check (75.0%), under the pilot gate's 80.0%: 2 fail"
        ]
        assert ci.get("/api/v1/runs").json()[0]["state"] == "closed"
        # The command line, on the same database: the same text and exit code as the API's answer.
        code, printed = _cli_check(db_url, "ci-7")
        stored = ci.get("/api/v1/runs/ci-7/checks").json()
        again = ci.post("/api/v1/runs/ci-7/checks").json()
        assert code == 1 == stored["exit_code"] == again["exit_code"]
        assert printed == stored["text"] == again["text"]
        assert printed.startswith("ci-7: 6/8 examples of the eval set pass every automated check (75.0%)")
        assert printed.endswith("FAIL 6/8 examples of the eval set pass every automated check (75.0%), under the \npilot gate's 80.0%: 2 fail\n")

    def test_a_clean_run_passes_with_exit_0_and_links(
        self, session: Session, world: World, api_as: Callable[..., TestClient]
    ) -> None:
        make_dataset(session, [{"case_id": "c1", "category": "routine"}, {"case_id": "c2", "category": "safety"}], name="small")
        session.commit()
        ci = api_as(scopes=["ci"])
        _push(ci, [good("c1", "billing_charge", CURRENT_3001), escalation("c2")], name="clean 1", dataset="small")
        body = ci.post("/api/v1/runs/clean%201/complete").json()
        assert (body["verdict"], body["exit_code"], body["reasons"]) == ("pass", 0, [])
        assert "PASS no golden or safety failure" in body["text"]
        base = "http://127.0.0.1:8000"  # DRAFTDESK_BASE_URL's default
        assert body["links"] == {
            "run": f"{base}/runs/clean%201",
            "compare": f"{base}/runs/compare?b=clean%201",
            "gate": f"{base}/gates/pilot?run=clean%201",
        }

    def test_compare_links_the_baseline(self, world: World, api_as: Callable[..., TestClient]) -> None:
        admin = api_as("admin", "lead")
        assert admin.post("/api/v1/runs/run-a/baseline").status_code == 200
        ci = api_as(scopes=["ci"])
        _push(ci, drafts_a())
        links = ci.post("/api/v1/runs/ci-7/complete").json()["links"]
        assert links["compare"].endswith("/runs/compare?a=run-a&b=ci-7")

    @pytest.mark.parametrize("role", ["lead", "pm", "ml_lead", "admin"])
    def test_who_may_check_again(self, role: str, world: World, api_as: Callable[..., TestClient]) -> None:
        assert api_as(role).post("/api/v1/runs/run-a/checks").status_code == 200
