"""One verdict per run: `draftdesk check`, the checks page, the API and the pilot gate count examples alike.

Hand-worked: a set of 100 routine cases and a run that drafted 3 of them, each draft good. Every
draft passes (3/3), but 97 examples have no draft, so 3/100 = 3.0% of the set's examples pass,
under the pilot gate's 80.0%: the CLI prints FAIL and exits 1, and the gate's criterion 1 reads 3%.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.checks.conftest import good
from tests.factories import make_article, make_dataset, make_run
from webapp.checks import service
from webapp.checks.examples import example_status, tally_examples
from webapp.checks.types import CheckResult
from webapp.core.spec import EvalSpec
from webapp.gates import service as gates_service
from webapp.runs.service import resolve_run

ROOT = Path(__file__).resolve().parents[2]
PASS = CheckResult("length", "pass", "ok")
FAIL = CheckResult("no_pii", "fail", "an email")
NA = CheckResult("safety_escalation", "not_applicable", "not a safety case")


def test_example_status_by_hand() -> None:
    assert example_status([]) == "missing"
    assert example_status([(PASS, NA)]) == "pass"
    assert example_status([(PASS,), (PASS, FAIL)]) == "fail"  # one failing sample fails the example
    assert example_status([(PASS,), None]) == "unchecked"
    assert example_status([(FAIL,), None]) == "fail"  # a failure is known whatever the unchecked draft does
    assert example_status([(NA,)]) == "fail"  # no check applied: nothing shows it is right


def test_tally_counts_unlisted_examples_as_missing() -> None:
    t = tally_examples(["pass", "pass", "pass", "fail", "unchecked"], total=10)
    assert (t.passing, t.failing, t.unchecked, t.missing, t.total) == (2 + 1, 1, 1, 5, 10)
    assert t.rate == 3 / 10
    assert tally_examples([], total=0).rate is None


def _three_of_hundred(session: Session) -> None:
    make_article(session, "KB-1042", ((1, "current"),))
    cases = [{"case_id": f"r{i:03d}", "category": "routine", "intent": "billing_charge"} for i in range(100)]
    ds = make_dataset(session, cases, name="hundred")
    make_run(session, ds, [good(f"r{i:03d}", "billing_charge") for i in range(3)], name="three-of-100")
    session.commit()


def test_cli_fails_a_run_that_drafted_3_of_100_cases(session: Session, db_url: str) -> None:
    _three_of_hundred(session)
    env = {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_MODE": "dev", "COLUMNS": "400"}
    proc = subprocess.run(
        [sys.executable, "-c", "from webapp.app.cli import main; main()", "check", "three-of-100"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "three-of-100: 3/100 examples of the eval set pass every automated check (3.0%); 3/3 drafts pass" in out
    assert (
        "FAIL 3/100 examples of the eval set pass every automated check (3.0%), under the pilot gate's 80.0%: "
        "97 have no draft in this run"
    ) in out
    assert "PASS" not in out


def test_page_api_and_gate_read_the_same_figure(
    session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
) -> None:
    _three_of_hundred(session)
    run = resolve_run(session=session, ref="three-of-100")
    service.check_run(session=session, spec=spec, run_id=run.id or 0)
    session.commit()
    lead = client_as("lead")
    page = lead.get("/runs/three-of-100/checks").text
    kpi = re.search(r'id="checks-examples"><div class="value">([^<]+)</div><div class="label">([^<]+)<', page)
    assert kpi is not None
    assert kpi.group(1) == "3.0%" and "(3/100; 97 without a draft in this run)" in kpi.group(2)
    assert "Fails the CI gate" in page and "Passes the CI gate" not in page
    data = lead.get(f"/api/v1/runs/{run.id}/checks").json()
    assert data["examples"] == {"passed": 3, "failed": 0, "unchecked": 0, "missing": 97, "total": 100, "pass_rate": 0.03}
    assert data["overall"]["pass_rate"] == 1.0 and data["gate"]["passes"] is False
    auto = next(c for c in gates_service.pilot_report(session=session, spec=spec, run=run).criteria if c.key == "automated_checks")
    assert auto.value == 0.03 and auto.status == "fail"
