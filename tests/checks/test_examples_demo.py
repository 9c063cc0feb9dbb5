"""The demo's demo-ppi run: its checks page and the pilot gate give one figure and one verdict.

demo-ppi copies only the demo run's drafts with text (no escalation, no fallback), so many of the
set's examples have no draft in it: most of its drafts pass, but the gate counts the set's examples.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from webapp.checks import service as checks_service
from webapp.core import units
from webapp.core.spec import EvalSpec
from webapp.gates import service as gates_service
from webapp.runs.service import resolve_run


@pytest.fixture
def db_url(demo_db_url: str) -> str:
    """The test starts from the seeded demo."""
    return demo_db_url


def test_demo_ppi_checks_page_agrees_with_the_gate(
    session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
) -> None:
    run = resolve_run(session=session, ref="demo-ppi")
    checked = checks_service.check_run(session=session, spec=spec, run_id=run.id or 0)  # the walk pressed Re-check
    session.commit()
    assert checked.summary.overall.rate is not None and checked.summary.overall.rate > 0.9  # the drafts' figure
    auto = next(c for c in gates_service.pilot_report(session=session, spec=spec, run=run).criteria if c.key == "automated_checks")
    page = client_as("lead").get("/runs/demo-ppi/checks").text
    kpi = re.search(r'id="checks-examples"><div class="value">([^<]+)</div>', page)
    assert kpi is not None
    assert auto.status == "fail" and auto.value is not None and auto.value < spec.gates.pilot.automated_pass_rate
    assert kpi.group(1) == units.percent(auto.value) == "72.0%"  # 72 of the set's 100 examples; 23 have no draft
    assert "Fails the CI gate" in page and "Passes the CI gate" not in page
    assert f"under the pilot gate&#39;s {units.percent(spec.gates.pilot.automated_pass_rate)}" in page
