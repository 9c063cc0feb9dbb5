"""The regression suite, baselines, run comparison and regression alerts, with two runs built here."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, col, select

from tests.checks.conftest import World, good
from tests.factories import make_article, make_dataset, make_run, words
from tests.reactions_support import after_run_checked
from webapp.checks import service as checks_service
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.datasets.loader import load_dataset
from webapp.datasets.models import EvalCase
from webapp.regression import alerts, comparison, service
from webapp.regression.models import RegressionAlert, RegressionCase
from webapp.runs.models import Draft, Run


def _check_and_alert(session: Session, spec: EvalSpec, run_id: int) -> list[RegressionAlert]:
    """Check a run as the page, the API and the CLI do: the checks, then the flow that raises alerts."""
    checks_service.check_run(session=session, spec=spec, run_id=run_id)
    return after_run_checked(session, spec, run_id)


def _draft_id(session: Session, run_id: int, case_id: str) -> int:
    query = select(Draft.id).join(EvalCase, col(EvalCase.id) == Draft.case_pk)
    return stored_id(session.exec(query.where(Draft.run_id == run_id, EvalCase.case_id == case_id)).one())


class TestAppendOnly:
    def test_database_refuses_update_and_delete(self, session: Session, world: World) -> None:
        service.add_case(session=session, created_by=world.user_id, source="review", case_id="x1", input="hi", note="wrong refund")
        session.commit()
        for stmt in ("UPDATE regression_case SET note = 'edited'", "DELETE FROM regression_case"):
            with pytest.raises(DBAPIError, match="append-only"):
                session.execute(text(stmt))
            session.rollback()
        assert session.exec(select(RegressionCase.note)).all() == ["wrong refund"]
        # An update through the ORM is refused too.
        case = service.add_case(session=session, created_by=world.user_id, source="run", case_id="x2", input="hi", note="n")
        session.commit()
        case.note = "changed"
        session.add(case)
        with pytest.raises(DBAPIError, match="append-only"):
            session.commit()
        session.rollback()

    def test_no_update_or_delete_path_in_the_service(self) -> None:
        names = [n for n in dir(service) if not n.startswith("_")]
        assert not [n for n in names if n.startswith(("update_case", "delete_case", "remove_case", "edit_case"))]


class TestAddCase:
    def test_refuses_duplicates_blank_notes_and_unknown_sources(self, session: Session, world: World) -> None:
        service.add_case(session=session, created_by=world.user_id, source="grading", case_id="c", input="i", note="n")
        with pytest.raises(service.RegressionError, match="already in the regression suite"):
            service.add_case(session=session, created_by=world.user_id, source="grading", case_id="c", input="i", note="n")
        with pytest.raises(service.RegressionError, match="note"):
            service.add_case(session=session, created_by=world.user_id, source="grading", case_id="d", input="i", note="  ")
        with pytest.raises(service.RegressionError, match="source"):
            service.add_case(session=session, created_by=world.user_id, source="nope", case_id="d", input="i", note="n")  # type: ignore[arg-type]

    def test_from_draft_copies_the_case(self, session: Session, spec: EvalSpec, world: World) -> None:
        draft_id = _draft_id(session, world.a_id, "r2")
        case = service.add_case_from_draft(session=session, draft_id=draft_id, created_by=world.user_id, note="stale KB-3001")
        assert (case.case_id, case.category, case.intent, case.source) == ("r2", "routine", "account_security", "run")
        assert case.source_ref == f"run run-a, draft {draft_id}"

    def test_seed_golden_is_idempotent(self, session: Session, world: World) -> None:
        added = service.seed_golden(session=session, created_by=world.user_id)
        assert [c.case_id for c in added] == ["g1"]
        assert service.seed_golden(session=session, created_by=world.user_id) == []
        assert service.count_cases(session=session) == 1


class TestSuiteReport:
    def test_case_by_case(self, session: Session, spec: EvalSpec, world: World) -> None:
        service.seed_golden(session=session, created_by=world.user_id)
        r2 = _draft_id(session, world.a_id, "r2")
        service.add_case_from_draft(session=session, draft_id=r2, created_by=world.user_id, note="stale")
        service.add_case(session=session, created_by=world.user_id, source="review", case_id="prod-77", input="i", note="n")
        before = service.suite_report(session=session, run_id=world.b_id)
        assert {r.case.case_id: r.status for r in before.results} == {"g1": "not_checked", "r2": "not_checked", "prod-77": "not_run"}
        checks_service.check_run(session=session, spec=spec, run_id=world.b_id)
        report = service.suite_report(session=session, run_id=world.b_id)
        assert {r.case.case_id: r.status for r in report.results} == {"g1": "fail", "r2": "pass", "prod-77": "not_run"}
        g1 = next(r for r in report.results if r.case.case_id == "g1")
        assert "cites KB-3001 revision 2, which is deprecated" in g1.reason
        assert report.pass_rate == pytest.approx(1 / 2)


class TestExport:
    def test_jsonl_reads_back_with_the_dataset_loader(self, session: Session, world: World, tmp_path: Path) -> None:
        service.seed_golden(session=session, created_by=world.user_id)
        service.add_case(
            session=session, created_by=world.user_id, source="review", case_id="prod-1",
            input='He said "refund" — twice', note="promised a refund", category="adversarial",
            kb_articles=["KB-1042"], reference="We cannot promise refunds.",
        )
        path = tmp_path / "suite.jsonl"
        path.write_text(service.export_jsonl(session=session), encoding="utf-8")
        cases, meta = load_dataset(path)
        assert meta["count"] == 2 and meta["format"] == ".jsonl"
        assert [c.id for c in cases] == ["g1", "prod-1"]
        prod = cases[1]
        assert (prod.input, prod.reference) == ('He said "refund" — twice', "We cannot promise refunds.")
        assert prod.description == "promised a refund"
        assert prod.metadata["category"] == "adversarial" and prod.metadata["kb_articles"] == ["KB-1042"]
        assert prod.metadata["regression_source"] == "review"
        assert cases[0].metadata["golden"] is True


class TestBaseline:
    def test_one_baseline_per_dataset_name(self, session: Session, world: World) -> None:
        service.mark_baseline(session=session, run_id=world.a_id)
        service.mark_baseline(session=session, run_id=world.b_id)
        session.refresh(world.a)
        assert not world.a.is_baseline and world.b.is_baseline
        assert service.baseline_for(session=session, run_id=world.a_id).id == world.b_id  # type: ignore[union-attr]
        service.unmark_baseline(session=session, run_id=world.b_id)
        assert service.baseline_for(session=session, run_id=world.a_id) is None


class TestCompare:
    def test_fixed_broke_unchanged_and_deltas(self, session: Session, spec: EvalSpec, world: World) -> None:
        for run in (world.a, world.b):
            checks_service.check_run(session=session, spec=spec, run_id=stored_id(run.id))
        cmp = comparison.compare_runs(session=session, spec=spec, a_id=world.a_id, b_id=world.b_id)
        changes = {c.case_id: c.change for c in cmp.cases}
        assert changes == {
            "g1": "broke", "r1": "unchanged_pass", "r2": "fixed", "r3": "unchanged_pass",
            "e1": "unchanged_fail", "a1": "unchanged_pass", "s1": "unchanged_pass", "s2": "broke",
        }
        assert (cmp.count("fixed"), cmp.count("broke"), cmp.count("unchanged")) == (1, 2, 5)
        assert (cmp.count("unchanged_pass"), cmp.count("unchanged_fail")) == (4, 1)
        # 3 of 8 paired cases changed, 1 one way and 2 the other: P(X <= 1 | n=3, p=1/2) = 4/8, doubled = 1.
        t = cmp.overall.test
        assert (t.pairs, t.fixed, t.broke) == (8, 1, 2) and t.p_value == pytest.approx(1.0)
        assert t.note == "3 of 8 cases changed (1 fixed, 2 broke): exact McNemar p = 1.000, within noise"
        assert (cmp.overall.a_passed, cmp.overall.a_total, cmp.overall.b_passed, cmp.overall.b_total) == (6, 8, 5, 8)
        assert [c.case_id for c in cmp.filtered(outcome="broke")] == ["g1", "s2"]
        assert [c.case_id for c in cmp.filtered(golden="yes")] == ["g1"]
        g1 = cmp.filtered(outcome="broke")[0]
        assert g1.a is not None and g1.b is not None and g1.a.passed and g1.b.failed_checks == ["citations_current"]
        assert cmp.overall.a == pytest.approx(6 / 8) and cmp.overall.b == pytest.approx(5 / 8)
        assert cmp.overall.delta == pytest.approx(-1 / 8)
        checks = {c.key: c for c in cmp.checks}
        # Every row is over the 8 paired cases: the share not failing the check (issue 34).
        # Citations: A fails r2 (stale) -> 7/8; B fails g1 (stale) and s2 (its draft cites nothing),
        # r2 fixed -> 6/8; change (1 fixed - 2 broke) / 8 = -1/8. Safety: A 8/8, B fails s2 -> 7/8.
        cit = checks["citations_current"]
        assert (cit.a_passed, cit.a_total, cit.b_passed, cit.b_total) == (7, 8, 6, 8)
        assert cit.delta == pytest.approx(-1 / 8)
        assert checks["safety_escalation"].a == 1.0 and checks["safety_escalation"].b == pytest.approx(7 / 8)
        assert checks["safety_escalation"].delta == pytest.approx(-1 / 8)
        # B's s2 draft (11 words) is a draft where none should be: length applies and fails.
        assert checks["length"].b == pytest.approx(7 / 8)
        assert cmp.rubric is None  # no final grades yet

    def test_per_check_changes_are_the_case_outcomes(self, session: Session, spec: EvalSpec) -> None:
        # Hand-built pair: routine-010 drafts at 0.9 in A (the fallback check does not apply) and at
        # 0.42 with a 60-word draft in B (it fails); routine-011 falls back correctly in both runs.
        # Fallback check over the 2 paired cases: A fails none (2/2), B fails routine-010 (1/2) -> -50 pts,
        # and the only case that changed on it is routine-010, which broke (the old pairing skipped
        # it: "not applicable" had no outcome).
        make_article(session, "KB-1042", ((1, "current"),))
        case = {"category": "routine", "intent": "billing_charge"}
        ds = make_dataset(session, [{**case, "case_id": f"routine-01{i}"} for i in (0, 1)], name="pair")
        fallback = {
            "case_id": "routine-011", "draft_text": None, "confidence": 0.4, "intent": "billing_charge",
            "citations": [{"article_id": "KB-1042", "revision": 1}],  # a fallback surfaces KB articles
        }
        drafted = good("routine-010", "billing_charge")
        a = make_run(session, ds, [drafted, fallback], name="pair-a")
        b = make_run(session, ds, [{**drafted, "confidence": 0.42}, fallback], name="pair-b")
        for run in (a, b):
            checks_service.check_run(session=session, spec=spec, run_id=stored_id(run.id))
        cmp = comparison.compare_runs(session=session, spec=spec, a_id=a.id, b_id=b.id)  # type: ignore[arg-type]
        rows = {c.case_id: c for c in cmp.cases}
        assert rows["routine-010"].change == "broke"
        assert "low_confidence_fallback" in rows["routine-010"].b.failed_checks  # type: ignore[union-attr]
        fb = {c.key: c for c in cmp.checks}["low_confidence_fallback"]
        assert (fb.a_passed, fb.a_total, fb.b_passed, fb.b_total) == (2, 2, 1, 2)
        assert fb.delta == pytest.approx(-0.5)
        assert (fb.test.pairs, fb.test.fixed, fb.test.broke) == (2, 0, 1)
        assert (fb.fixed_cases, fb.broke_cases) == ([], ["routine-010"])
        # One source of truth: every check's lists are the case table's failed-check differences.
        for c in cmp.checks:
            broke = [r.case_id for r in cmp.cases if r.a and r.b and c.key in r.b.failed_checks and c.key not in r.a.failed_checks]
            fixed = [r.case_id for r in cmp.cases if r.a and r.b and c.key in r.a.failed_checks and c.key not in r.b.failed_checks]
            assert (c.broke_cases, c.fixed_cases) == (broke, fixed)
            assert (c.test.broke, c.test.fixed) == (len(broke), len(fixed))
        assert (cmp.overall.broke_cases, cmp.overall.fixed_cases) == (["routine-010"], [])

    def test_exact_mcnemar_against_hand_worked_values(self) -> None:
        # Two-sided exact McNemar = 2 * P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2), capped at 1.
        assert comparison.mcnemar_exact(0, 0) is None
        assert comparison.mcnemar_exact(1, 1) == pytest.approx(1.0)
        assert comparison.mcnemar_exact(0, 6) == pytest.approx(2 / 64)  # 0.03125
        assert comparison.mcnemar_exact(8, 1) == pytest.approx(2 * (1 + 9) / 512)  # 0.0390625
        assert comparison.mcnemar_exact(3, 7) == pytest.approx(2 * (1 + 10 + 45 + 120) / 1024)  # 0.34375
        small = comparison.PairedTest(pairs=100, fixed=1, broke=1)
        assert small.note == "2 of 100 cases changed (1 fixed, 1 broke): exact McNemar p = 1.000, within noise"
        assert comparison.PairedTest(pairs=100, fixed=7, broke=0).significant

    def test_refuses_runs_over_different_datasets(self, session: Session, spec: EvalSpec, world: World) -> None:
        other = make_dataset(session, [{"case_id": "z"}], name="other", version=2)
        run = make_run(session, other, [good("z", "billing_charge")], name="other-run")
        with pytest.raises(service.NotComparable, match="different datasets"):
            comparison.compare_runs(session=session, spec=spec, a_id=world.a_id, b_id=stored_id(run.id))


class TestAlerts:
    def test_golden_citation_failure_and_pass_rate_drop(self, session: Session, spec: EvalSpec, world: World) -> None:
        _check_and_alert(session, spec, world.a_id)
        service.mark_baseline(session=session, run_id=world.a_id)
        new_alerts = _check_and_alert(session, spec, world.b_id)
        assert sorted(a.kind for a in new_alerts) == ["golden_check", "pass_rate_drop"]
        golden = next(a for a in new_alerts if a.kind == "golden_check")
        assert golden.message == (
            "Golden example g1 fails Citations current in run run-b: "
            "cites KB-3001 revision 2, which is deprecated; current is revision 4."
        )
        assert golden.evidence["checks"] == ["citations_current"]
        drop = next(a for a in new_alerts if a.kind == "pass_rate_drop")
        # 6/8 -> 5/8 is a drop of 12.5 points.
        assert drop.evidence["drop"] == pytest.approx(0.125)
        assert "down 12.5 points" in drop.message
        assert _check_and_alert(session, spec, world.b_id) == []  # re-checking raises nothing new
        assert alerts.count_open_alerts(session=session) == 2

    def test_drop_of_exactly_the_threshold_does_not_alert(self, session: Session, spec: EvalSpec) -> None:
        # 17/20 = 85% -> 16/20 = 80%: exactly 5 points, which is not "more than 5".
        cases = [{"case_id": f"c{i}", "category": "routine"} for i in range(20)]
        ds = make_dataset(session, cases, name="twenty")
        make_article(session, "KB-1042", ((1, "current"),))

        def run(name: str, failing: int) -> Run:
            drafts = [
                {**good(f"c{i}", "billing_charge"), "draft_text": words(10 if i < failing else 60)} for i in range(20)
            ]
            return make_run(session, ds, drafts, name=name)

        base, at_limit, beyond = run("base", 3), run("at-limit", 4), run("beyond", 5)
        session.commit()
        _check_and_alert(session, spec, stored_id(base.id))
        service.mark_baseline(session=session, run_id=stored_id(base.id))
        assert _check_and_alert(session, spec, stored_id(at_limit.id)) == []
        alerts = _check_and_alert(session, spec, stored_id(beyond.id))
        assert [a.kind for a in alerts] == ["pass_rate_drop"]
        assert alerts[0].evidence["drop"] == pytest.approx(0.85 - 0.75)

    def test_acknowledge(self, session: Session, spec: EvalSpec, world: World) -> None:
        _check_and_alert(session, spec, world.b_id)
        (alert, _run), = alerts.list_alerts(session=session, open_only=True)
        assert alert.kind == "golden_check"  # without a baseline, no pass-rate drop is raised
        alerts.acknowledge_alert(session=session, alert_id=stored_id(alert.id), user_id=world.user_id)
        assert alerts.list_alerts(session=session, open_only=True) == []
        assert alert.acknowledged_by == world.user_id


class TestInclusionNotice:
    def test_a_case_no_dataset_holds_and_a_case_of_a_dataset(self, session: Session, world: World) -> None:
        service.add_case(session=session, created_by=world.user_id, source="review", case_id="review-ev-9", input="Where is my refund?", note="n")
        notice = service.inclusion_notice(session=session, case_id="review-ev-9")
        assert notice.startswith("The next run must include review-ev-9: no dataset holds it yet")
        assert '"draftdesk regression export regression-suite.jsonl"' in notice
        notice = service.inclusion_notice(session=session, case_id="r1")
        assert notice.startswith("The next run must include r1: runs over eval have it")
