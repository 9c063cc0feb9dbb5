"""The plan's drop alert (issue 41 item 1): by default against the previous checked run, on the set's examples rate.

Hand-worked runs over one 100-case set in the plan's mix (tests/checks/conftest.plan_cases; a failing
draft cites a deprecated revision, a skipped case has no draft; the threshold is 5 points):
- 95 -> 83 of 100 examples (5 then 17 routine drafts fail): down 12.0 points, fires with no baseline marked.
- 98 -> 90 of 100 examples, the second run drafting 92 cases of which 90 pass: the drafts' rate is
  90/92 = 97.8%, 0.2 points below 98%, yet the set's rate falls 8 points: fires.
- 90 -> 84 of 100 examples, 2 cases fixed and 8 broken: exact McNemar p = 2 * (1 + 10 + 45) / 2^10
  = 112/1024 = 0.109 (not significant), and a 6-point drop, more than 5: the alert fires; the compare
  page says both.
- 95 -> 90 exactly 5 points: not more than 5, no alert.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from rich.console import Console
from sqlmodel import Session, select

from tests.checks.conftest import plan_cases, plan_drafts, plan_kb, routine
from tests.factories import make_dataset, make_run
from tests.reactions_support import after_run_checked
from webapp.checks import service as checks_service
from webapp.checks.cli import check_and_report
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.datasets.models import Dataset
from webapp.regression import service as regression_service
from webapp.regression.comparison import mcnemar_exact
from webapp.regression.drop import drop_reading
from webapp.regression.models import RegressionAlert
from webapp.runs.models import Run

CASES = plan_cases()


def _set(session: Session) -> Dataset:
    plan_kb(session)
    return make_dataset(session, CASES, name="plan-set")


def _run(session: Session, ds: Dataset, name: str, *, fail: set[str] = frozenset(), skip: set[str] = frozenset()) -> Run:
    run = make_run(session, ds, plan_drafts(CASES, fail=fail, skip=skip), name=name)
    session.commit()
    return run


def _check(session: Session, spec: EvalSpec, run: Run) -> tuple[int, str]:
    buf = io.StringIO()
    code = check_and_report(session=session, spec=spec, ref=run.name, out=Console(file=buf, width=2000, color_system=None))
    session.commit()
    return code, buf.getvalue()


def _drops(session: Session, run: Run) -> list[RegressionAlert]:
    return list(session.exec(select(RegressionAlert).where(RegressionAlert.run_id == run.id, RegressionAlert.kind == "pass_rate_drop")))


class TestTheBaselineDefaultsToThePreviousCheckedRun:
    def test_a_run_12_points_below_the_previous_run_fails_check_with_no_baseline_marked(self, session: Session, spec: EvalSpec) -> None:
        ds = _set(session)
        before = _run(session, ds, "before", fail=routine(5, 5))
        code, text = _check(session, spec, before)
        assert code == 0 and "drop alert: no earlier run: drop not evaluated" in text
        after = _run(session, ds, "after", fail=routine(5, 17))
        code, text = _check(session, spec, after)
        assert code == 1  # 0, and no alert, on 3c27e1d
        reading = (
            "baseline before (the previous checked run of the dataset; no baseline marked): 95.0% (95/100) of the set's "
            "examples pass there, 83.0% (83/100) here, down 12.0 points, more than the 5-point threshold: the drop alert fires"
        )
        assert f"FAIL the plan's drop alert fires: {reading}" in text
        assert f"drop alert: {reading}" in text
        [alert] = _drops(session, after)
        assert alert.evidence["baseline_run"] == "before" and alert.evidence["baseline_kind"] == "previous"
        assert alert.evidence["drop"] == pytest.approx(0.12)

    def test_a_marked_baseline_overrides_the_previous_run(self, session: Session, spec: EvalSpec) -> None:
        ds = _set(session)
        old = _run(session, ds, "old", fail=routine(5, 5))  # 95%
        mid = _run(session, ds, "mid", fail=routine(5, 15))  # 85%
        new = _run(session, ds, "new", fail=routine(5, 16))  # 84%
        for run in (old, mid, new):
            checks_service.check_run(session=session, spec=spec, run_id=stored_id(run.id))
        r = drop_reading(session=session, spec=spec, run_id=stored_id(new.id))
        assert r.baseline is not None and (r.baseline.name, r.baseline.kind) == ("mid", "previous")
        assert r.drop == pytest.approx(0.01) and not r.fires  # 85 -> 84
        regression_service.mark_baseline(session=session, run_id=stored_id(old.id))
        r = drop_reading(session=session, spec=spec, run_id=stored_id(new.id))
        assert r.baseline is not None and (r.baseline.name, r.baseline.kind) == ("old", "marked")
        assert r.drop == pytest.approx(0.11) and r.fires  # 95 -> 84
        assert r.text.startswith("baseline old (marked as the dataset's baseline): 95.0% (95/100)")

    def test_an_unchecked_earlier_run_is_no_baseline_and_exactly_5_points_does_not_fire(self, session: Session, spec: EvalSpec) -> None:
        ds = _set(session)
        _run(session, ds, "never-checked", fail=routine(5, 40))
        first = _run(session, ds, "first", fail=routine(5, 5))  # 95%
        checks_service.check_run(session=session, spec=spec, run_id=stored_id(first.id))
        assert drop_reading(session=session, spec=spec, run_id=stored_id(first.id)).text == "no earlier run: drop not evaluated"
        second = _run(session, ds, "second", fail=routine(5, 10))  # 90%
        checks_service.check_run(session=session, spec=spec, run_id=stored_id(second.id))
        r = drop_reading(session=session, spec=spec, run_id=stored_id(second.id))
        assert r.drop == pytest.approx(0.05) and not r.fires
        assert r.text.endswith("down 5.0 points, not more than the 5-point threshold: no drop alert")


class TestTheAlertReadsTheSetsExamples:
    def test_98_to_90_with_8_cases_without_a_draft_fires(self, session: Session, spec: EvalSpec) -> None:
        ds = _set(session)
        a = _run(session, ds, "full", fail=routine(5, 2))
        b = _run(session, ds, "fewer", fail=routine(5, 2), skip=routine(40, 8))
        for run in (a, b):
            checks_service.check_run(session=session, spec=spec, run_id=stored_id(run.id))
        summary = checks_service.run_summary(session=session, run_id=stored_id(b.id))
        assert (summary.overall.passed, summary.overall.total) == (90, 92)  # the drafts' rate: 97.8%, down 0.2 points
        assert (summary.examples.passing, summary.examples.missing, summary.examples.total) == (90, 8, 100)
        new = after_run_checked(session, spec, stored_id(b.id))  # the check's reactions (regression alerts)
        [alert] = [x for x in new if x.kind == "pass_rate_drop"]  # none on 3c27e1d
        assert alert.evidence["pass_rate"] == pytest.approx(0.90) and alert.evidence["baseline_pass_rate"] == pytest.approx(0.98)
        assert alert.evidence["drop"] == pytest.approx(0.08)
        assert alert.message.startswith("Pass rate of run fewer is 90.0% of the eval set's examples (90/100), down 8.0 points from baseline full")


class TestTheComparePageSaysBoth:
    def test_a_6_point_drop_with_p_0_109_shows_the_alert_beside_the_test(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        ds = _set(session)
        a = _run(session, ds, "cmp-a", fail=routine(5, 10))  # 90 pass
        b = _run(session, ds, "cmp-b", fail=routine(7, 16))  # routine-5, 6 fixed; routine-15..22 broke: 84 pass
        for run in (a, b):
            checks_service.check_run(session=session, spec=spec, run_id=stored_id(run.id))
        session.commit()
        assert mcnemar_exact(2, 8) == pytest.approx(112 / 1024)
        page = client_as("pm").get("/runs/compare?a=cmp-a&b=cmp-b")
        assert page.status_code == 200
        text = " ".join(page.text.split())
        assert "10 of 100 cases changed (2 fixed, 8 broke): exact McNemar p = 0.109" in text
        # The headline and the "All checks" row said "within noise" alone on 3c27e1d.
        headline = text.split("<h2>Per-check pass rates</h2>")[0]
        overall_row = text.split('class="compare-overall"')[1].split("</tr>")[0]
        assert "within noise" not in headline and "within noise" not in overall_row
        assert "not significant; the drop alert fires" in overall_row
        assert "not significant on its own (p = 0.109); the plan's drop alert fires" in text
        assert "The plan's drop alert fires" in text
        assert (
            "cmp-b against baseline cmp-a (run A of this comparison): 90.0% (90/100) of the set&#39;s examples pass there, "
            "84.0% (84/100) here, down 6.0 points, more than the 5-point threshold: the drop alert fires."
        ) in text
        assert "cmp-a is the baseline of cmp-b's own alert (the previous checked run of the dataset; no baseline marked)." in text

    def test_the_run_checks_page_says_which_baseline_was_used(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        ds = _set(session)
        a = _run(session, ds, "page-a", fail=routine(5, 2))
        checks_service.check_run(session=session, spec=spec, run_id=stored_id(a.id))
        session.commit()
        lead = client_as("lead")
        assert "no earlier run: drop not evaluated" in lead.get("/runs/page-a/checks").text
        b = _run(session, ds, "page-b", fail=routine(5, 4))
        checks_service.check_run(session=session, spec=spec, run_id=stored_id(b.id))
        session.commit()
        text = " ".join(lead.get("/runs/page-b/checks").text.split())
        assert (
            "baseline page-a (the previous checked run of the dataset; no baseline marked): 98.0% (98/100) of the set&#39;s "
            "examples pass there, 96.0% (96/100) here, down 2.0 points, not more than the 5-point threshold: no drop alert"
        ) in text
