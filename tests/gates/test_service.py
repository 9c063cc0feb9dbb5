"""The gates read real data through the other domains' services: checks, grades, suite, events, survey."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import pytest
from rich.console import Console
from sqlmodel import Session, select

from tests.factories import make_article, make_dataset, make_run, make_user, words
from tests.metrics.conftest import ev, settle
from webapp.auth.service import principal_for_user
from webapp.checks import service as checks_service
from webapp.checks.cli import check_and_report
from webapp.core.spec import EvalSpec
from webapp.datasets.models import Dataset, EvalCase
from webapp.gates import service
from webapp.gates.models import GateSignoff
from webapp.grading.grades import record_grade
from webapp.grading.scores import validate_scores
from webapp.grading.status import grading_status
from webapp.metrics.ingest import ingest_events
from webapp.regression import service as regression_service
from webapp.runs.models import Draft
from webapp.survey import service as survey_service


def small_gate_spec(spec: EvalSpec, min_cases: int = 10, production_cases: int = 10) -> EvalSpec:
    """The real spec with gates sized for a 10-case test set, planned as build_run's mix (9 routine, 1 safety)."""
    gates = spec.gates.model_copy(
        update={
            "pilot": spec.gates.pilot.model_copy(update={"min_cases": min_cases}),
            "production": spec.gates.production.model_copy(update={"min_cases": production_cases}),
        }
    )
    mix = {"routine": 0.9, "edge": 0.0, "adversarial": 0.0, "safety": 0.1}
    return spec.model_copy(update={"gates": gates, "dataset": spec.dataset.model_copy(update={"categories": mix})})


def good_draft(case_id: str) -> dict[str, Any]:
    return {
        "case_id": case_id,
        "draft_text": words(80, "helpful"),
        "citations": [{"article_id": "KB-1", "revision": 1}],
        "confidence": 0.85,
        "intent": "billing_charge",
        "escalated": False,
    }


def build_run(session: Session, *, safety_drafted: bool = False) -> Any:
    """A 10-case run: 9 routine (2 golden) with good drafts, 1 safety case escalated (or drafted)."""
    make_article(session, "KB-1")
    cases = [
        {"case_id": f"routine-{i}", "category": "routine", "intent": "billing_charge", "golden": i < 2}
        for i in range(9)
    ] + [{"case_id": "safety-1", "category": "safety", "intent": "billing_charge", "expected_behavior": "escalate"}]
    ds = make_dataset(session, cases)
    drafts = [good_draft(f"routine-{i}") for i in range(9)]
    if safety_drafted:
        drafts.append(good_draft("safety-1"))
    else:
        drafts.append({"case_id": "safety-1", "draft_text": None, "escalated": True, "confidence": 0.9, "intent": "billing_charge"})
    return make_run(session, ds, drafts)


def grade_all(session: Session, spec: EvalSpec, run_id: int, scores: dict[str, Any], overrides: dict[int, dict[str, Any]] | None = None) -> None:
    graders = [make_user(session, email=f"g{i}@example.test", roles=["labeler"]) for i in (1, 2)]
    for draft_id in grading_status(session=session, run_id=run_id).states:
        for g in graders:
            s = validate_scores(spec=spec, data=(overrides or {}).get(draft_id, scores))
            record_grade(session=session, spec=spec, draft_id=draft_id, grader_id=g.id, scores=s)
    session.flush()


GOOD = {"factual_accuracy": "pass", "citation_relevance": 4, "tone": 4, "completeness": 4, "rationale": "fine"}


def checked_run(session: Session, spec: EvalSpec, **kw: Any) -> Any:
    """build_run, with the automated checks run."""
    run = build_run(session, **kw)
    checks_service.check_run(session=session, spec=spec, run_id=run.id)
    return run


def ready_run(session: Session, spec: EvalSpec) -> tuple[Any, Any]:
    """A checked run graded GOOD by two graders, golden routine-0 in the suite; returns (run, lead)."""
    run = checked_run(session, spec)
    lead = make_user(session, email="lead@example.test", roles=["lead"])
    grade_all(session, spec, run.id, GOOD)
    regression_service.add_case(
        session=session, created_by=lead.id, source="golden", case_id="routine-0", input="q", note="golden"
    )
    return run, lead


def criteria(session: Session, spec: EvalSpec, run: Any) -> dict[str, Any]:
    """The pilot report's criteria by key."""
    return {c.key: c for c in service.pilot_report(session=session, spec=spec, run=run).criteria}


def principal(session: Session, email: str, *roles: str) -> Any:
    return principal_for_user(session=session, user=make_user(session, email=email, roles=roles))


class TestPilotGate:
    def test_passes_when_every_criterion_holds(self, session: Session, spec: EvalSpec) -> None:
        spec = small_gate_spec(spec)
        run, _ = ready_run(session, spec)
        rep = service.pilot_report(session=session, spec=spec, run=run)
        keys = ("automated_checks", "human_grading", "golden_factual", "safety_escalation", "regression_suite")
        assert [(c.key, c.status) for c in rep.criteria] == [(k, "pass") for k in keys]
        assert rep.passed and rep.missing == []

    def test_ungraded_run_is_incomplete_and_lists_the_drafts(self, session: Session, spec: EvalSpec) -> None:
        spec = small_gate_spec(spec)
        run = checked_run(session, spec)
        rep = service.pilot_report(session=session, spec=spec, run=run)
        human = next(c for c in rep.criteria if c.key == "human_grading")
        # 9 drafts with text need grades; the escalated safety draft does not.
        assert human.status == "incomplete" and len(human.evidence) == 9
        assert rep.status == "incomplete"

    def test_drafted_safety_case_fails_and_names_it(self, session: Session, spec: EvalSpec) -> None:
        spec = small_gate_spec(spec)
        run = checked_run(session, spec, safety_drafted=True)
        rep = service.pilot_report(session=session, spec=spec, run=run)
        by_key = {c.key: c for c in rep.criteria}
        safety = by_key["safety_escalation"]
        assert safety.status == "fail" and [e.label for e in safety.evidence] == ["safety-1"]
        assert by_key["automated_checks"].measured == "9/10 examples pass (90.0%); 10 drafts"
        assert rep.status == "fail"

    def test_cases_the_run_did_not_draft_fail_and_are_named_with_their_page(
        self, session: Session, spec: EvalSpec
    ) -> None:
        spec = small_gate_spec(spec)
        ds = session.get(Dataset, build_run(session).dataset_id)
        # A second run over the same 10 cases that drafted only routine-2..routine-8 (7 of 10):
        # golden routine-0 and routine-1 and safety-1 have no draft. By hand: 7/10 = 70% < 80%.
        partial = make_run(session, ds, [good_draft(f"routine-{i}") for i in range(2, 9)], name="partial")
        checks_service.check_run(session=session, spec=spec, run_id=partial.id)
        by_key = criteria(session, spec, partial)
        auto = by_key["automated_checks"]
        assert auto.status == "fail" and auto.value == pytest.approx(0.7)
        assert auto.measured == "7/10 examples pass (70.0%); 7 drafts, 3 examples without a draft"
        assert [(e.label, e.href) for e in auto.evidence] == [
            (cid, f"/datasets/{ds.id}/cases/{cid}") for cid in ("routine-0", "routine-1", "safety-1")
        ]
        golden = by_key["golden_factual"]
        assert golden.status == "fail"
        assert golden.summary == "routine-0 has no draft in this run; routine-1 has no draft in this run"

    def test_unchecked_run_says_to_run_the_checks(self, session: Session, spec: EvalSpec) -> None:
        run = build_run(session)
        auto = criteria(session, small_gate_spec(spec), run)["automated_checks"]
        assert auto.status == "incomplete" and "press Re-check" in auto.summary
        assert auto.command == f"draftdesk check {run.name}"

    def test_a_set_off_the_plans_mix_fails_criterion_1_and_shows_the_mix(
        self, session: Session, spec: EvalSpec
    ) -> None:
        # The real plan (60/20/10/10) with the gate sized for 10 cases: build_run's 9 routine + 1 safety
        # is 90%/0%/0%/10%: routine +30 pts, edge -20 pts, adversarial -10 pts: does not match.
        sized = small_gate_spec(spec).model_copy(update={"dataset": spec.dataset})
        run = checked_run(session, sized)
        auto = criteria(session, sized, run)["automated_checks"]
        assert auto.status == "fail" and auto.value == pytest.approx(1.0)
        assert auto.summary.startswith("the eval set does not match the plan: the category mix does not match")
        assert [(p.key, p.measured, p.status) for p in auto.parts][:4] == [
            ("mix_routine", "9 (90.0%)", "fail"), ("mix_edge", "0 (0.0%)", "fail"),
            ("mix_adversarial", "0 (0.0%)", "fail"), ("mix_safety", "1 (10.0%)", "pass"),
        ]
        assert auto.evidence[0].href == f"/datasets/{run.dataset_id}"

    def test_full_size_gate_refuses_a_10_case_set(self, session: Session, spec: EvalSpec) -> None:
        auto = criteria(session, spec, checked_run(session, spec))["automated_checks"]
        assert auto.status == "fail" and "needs at least 100" in auto.summary

    def test_a_run_of_escalations_fails_the_pilot_gate_with_the_reason(self, session: Session, spec: EvalSpec) -> None:
        spec = small_gate_spec(spec)
        ds = session.get(Dataset, build_run(session).dataset_id)
        # A second run over the same 10 cases whose drafts are all escalations with no text.
        ids = [*(f"routine-{i}" for i in range(9)), "safety-1"]
        never = make_run(session, ds, [{"case_id": c, "draft_text": None, "escalated": True} for c in ids], name="never")
        checks_service.check_run(session=session, spec=spec, run_id=never.id)
        rep = service.pilot_report(session=session, spec=spec, run=never)
        by_key = {c.key: c for c in rep.criteria}
        assert rep.status == "fail"  # not incomplete
        auto = by_key["automated_checks"]
        # 9 routine cases expect a draft and fail; the safety case passes: 1/10.
        assert auto.status == "fail" and auto.value == pytest.approx(1 / 10)
        assert auto.summary == (
            "only 10.0% of the set's examples pass every automated check; 9 fail (Expected behaviour: 9)"
        )
        assert any(m.startswith("Automated checks: only 10.0%") for m in rep.missing)
        golden = by_key["golden_factual"]
        assert golden.status == "fail"
        assert golden.summary == "routine-0 fails Expected behaviour; routine-1 fails Expected behaviour"


class TestOneGoldenRule:
    """`draftdesk check` (CI gate) and the pilot gate's golden criterion decide a golden draft with one rule."""

    def _verdicts(self, session: Session, spec: EvalSpec, run: Any) -> tuple[list[str], Any]:
        buf = io.StringIO()
        check_and_report(session=session, spec=spec, ref=run.name, out=Console(file=buf, width=500, color_system=None))
        lines = buf.getvalue().splitlines()
        cli = [line.removeprefix("FAIL ") for line in lines if line.startswith("FAIL golden example")]
        return cli, criteria(session, spec, run)["golden_factual"]

    def test_a_golden_length_failure_fails_both(self, session: Session, spec: EvalSpec) -> None:
        # Used to disagree: the CLI failed routine-0 (any failed check), the gate passed it (citations only).
        spec = small_gate_spec(spec)
        run = build_run(session)
        short = _draft_of(session, run, "routine-0")
        short.draft_text = words(20, "brief")
        session.add(short)
        checks_service.check_run(session=session, spec=spec, run_id=run.id)
        grade_all(session, spec, run.id, GOOD)
        cli, golden = self._verdicts(session, spec, run)
        assert golden.status == "fail" and golden.summary == "routine-0 fails Length"
        assert cli == ["golden example routine-0 fails Length: the draft has 20 words, fewer than the 50–500 allowed"]

    def test_a_golden_factual_fail_grade_fails_both(self, session: Session, spec: EvalSpec) -> None:
        # Used to disagree the other way: the gate failed routine-1 (graded factual fail), the CLI ignored grades.
        spec = small_gate_spec(spec)
        run = checked_run(session, spec)
        draft_id = _draft_of(session, run, "routine-1").id
        bad = {**GOOD, "factual_accuracy": "fail", "unsupported_claim": "helpful helpful"}
        grade_all(session, spec, run.id, GOOD, overrides={draft_id: bad})  # both graders agree: fail
        cli, golden = self._verdicts(session, spec, run)
        assert cli == ["golden example routine-1 fails Factual accuracy (final human grade): the final grade is fail"]
        assert golden.status == "fail" and golden.summary == "routine-1 fails Factual accuracy (final human grade)"


def _draft_of(session: Session, run: Any, case_id: str) -> Any:
    return session.exec(
        select(Draft).join(EvalCase, EvalCase.id == Draft.case_pk).where(Draft.run_id == run.id, EvalCase.case_id == case_id)
    ).one()


def pilot_events(spec: EvalSpec, bad_days: frozenset[dt.date]) -> list[dict[str, Any]]:
    """Ten events a day over the pilot; escalation within baseline (1 of 10 at 8% baseline)."""
    out = []
    day = spec.online_metrics.pilot.start
    while day <= spec.online_metrics.pilot.end:
        for i in range(10):
            action = "reject" if day in bad_days and i < 5 else "accept"
            out.append(ev(day, 10, action=action, escalated=i == 0, confidence=0.9, latency_ms=1500,
                          handle_time_s=120, cost_usd=0.01))
        day += dt.timedelta(days=1)
    return out


class TestProductionGate:
    def _ready(self, session: Session, spec: EvalSpec, bad_days: frozenset[dt.date] = frozenset()) -> Any:
        """With small_gate_spec: a ready run, the pilot's events, a survey round; returns (spec, run, a later day)."""
        spec = small_gate_spec(spec)
        run, _ = ready_run(session, spec)
        events = pilot_events(spec, bad_days)
        for i in range(0, len(events), 1000):
            ingest_events(session=session, spec=spec, items=events[i : i + 1000])
        settle(session, spec)
        survey_service.open_round(session=session, name="pilot")
        for n, h in enumerate(["yes", "yes", "no", "yes", "no", "yes", "no", "neutral"], start=1):
            survey_service.record_answer(session=session, agent_id=f"a{n}", helpful=h)
        session.flush()
        return spec, run, spec.online_metrics.pilot.end + dt.timedelta(days=3)

    def test_ten_business_days_on_target_passes(self, session: Session, spec: EvalSpec) -> None:
        spec, run, after = self._ready(session, spec)
        rep = service.production_report(session=session, spec=spec, run=run, today=after)
        by_key = {c.key: c for c in rep.criteria}
        # The pilot (Mon 2 Nov - Fri 13 Nov 2026) has 10 business days, all on target.
        assert by_key["pilot_targets"].value == 10 and by_key["pilot_targets"].status == "pass"
        assert by_key["no_hallucinations"].status == "pass"
        assert by_key["survey"].status == "pass" and by_key["survey"].value == 1
        assert by_key["full_eval_set"].status == "pass"
        assert rep.passed

    def test_a_new_round_with_one_helpful_answer_does_not_pass_the_survey(self, session: Session, spec: EvalSpec) -> None:
        spec, run, after = self._ready(session, spec)  # round "pilot": 4 helpful, 3 not, 1 neutral
        survey_service.open_round(session=session, name="week 3")
        survey_service.record_answer(session=session, agent_id="a1", helpful="yes")
        rep = service.production_report(session=session, spec=spec, run=run, today=after)
        survey = {c.key: c for c in rep.criteria}["survey"]
        # Only the newest round counts, and 1 of its 8 needed answers is in: not a pass, not the old round's.
        assert survey.status == "incomplete" and survey.value == 1
        assert survey.measured == "1 helpful, 0 not, 0 neutral (net +1); 1 of 8 answers needed"
        assert not rep.passed

    def test_nine_business_days_then_a_weekend_fails(self, session: Session, spec: EvalSpec) -> None:
        # Monday 2 Nov misses (50% rejected); Tue 3 - Fri 6, weekend, Mon 9 - Fri 13 = 9 business days.
        spec, run, after = self._ready(session, spec, frozenset({dt.date(2026, 11, 2)}))
        crit = service.production_report(session=session, spec=spec, run=run, today=after).criteria[0]
        assert crit.value == 9 and crit.status == "fail"
        assert crit.evidence[0].label == "Mon 2026-11-02"
        # the day's figures and targets in the metrics' units (half the drafts rejected)
        assert "reject rate 50.0% (target < 5.0%)" in crit.evidence[0].detail
        assert "pilot window 2026-11-02 – 2026-11-13, all traffic" in crit.measured
        # The same streak while the pilot still runs is not yet a failure.
        during = service.production_report(session=session, spec=spec, run=run, today=dt.date(2026, 11, 13)).criteria[0]
        assert during.status == "incomplete"


class TestSignoff:
    def test_no_go_records_the_report_and_go_needs_a_pass(self, session: Session, spec: EvalSpec) -> None:
        run = build_run(session)
        pm = principal(session, "pm@example.test", "pm")
        with pytest.raises(service.GateError, match="only a no-go"):
            service.sign_off(session=session, spec=spec, gate="pilot", run=run, principal=pm, decision="go")
        row = service.sign_off(
            session=session, spec=spec, gate="pilot", run=run, principal=pm, decision="no_go", note="not yet"
        )
        # Not checked yet, but the 10-case set is below the 100 cases the pilot gate needs: fail.
        assert row.role == "pm" and row.verdict == "fail" and row.report["gate"] == "pilot"
        assert [s.id for s in service.signoffs(session=session, gate="pilot", run_id=run.id)] == [row.id]

    def test_each_person_signs_a_gate_once(self, session: Session, spec: EvalSpec) -> None:
        run = build_run(session)
        pm, lead = principal(session, "pm1@example.test", "pm"), principal(session, "lead1@example.test", "lead")
        service.sign_off(session=session, spec=spec, gate="pilot", run=run, principal=pm, decision="no_go")
        with pytest.raises(service.GateError, match="already signed the pilot gate for this run as PM \\(no-go"):
            service.sign_off(session=session, spec=spec, gate="pilot", run=run, principal=pm, decision="no_go")
        # Another person, or the same person on the other gate, still signs.
        service.sign_off(session=session, spec=spec, gate="pilot", run=run, principal=lead, decision="no_go")
        service.sign_off(session=session, spec=spec, gate="production", run=run, principal=pm, decision="no_go")
        assert len(service.signoffs(session=session, gate="pilot", run_id=run.id)) == 2


class TestSignoffState:
    """The plan: results reviewed by PM and ML lead before deploy."""

    @staticmethod
    def _row(role: str, decision: str, minute: int) -> GateSignoff:
        return GateSignoff(
            gate="pilot", run_id=1, user_id=minute, role=role, verdict="pass", decision=decision, report={},
            signed_at=dt.datetime(2026, 11, 16, 9, minute, tzinfo=dt.UTC),
        )

    def test_go_needs_the_pm_and_the_ml_lead(self, spec: EvalSpec) -> None:
        assert spec.gates.signoff_roles == ["pm", "ml_lead"]
        pm_go, ml_go, lead_go = self._row("pm", "go", 1), self._row("ml_lead", "go", 2), self._row("lead", "go", 3)
        only_pm = service.signoff_state(spec=spec, signed=[pm_go])
        assert not only_pm.approved and only_pm.missing == ["ml_lead"]
        # The team lead's go does not stand in for the ML lead.
        assert service.signoff_state(spec=spec, signed=[pm_go, lead_go]).missing == ["ml_lead"]
        both = service.signoff_state(spec=spec, signed=[ml_go, pm_go])
        assert both.approved and both.missing == [] and both.signed_go["ml_lead"] is ml_go
        held = service.signoff_state(spec=spec, signed=[pm_go, ml_go, self._row("lead", "no_go", 4)])
        assert not held.approved and len(held.no_go) == 1

    def test_the_ml_lead_signs_as_ml_lead(self, session: Session, spec: EvalSpec) -> None:
        run = build_run(session)

        def sign(who: Any) -> Any:
            return service.sign_off(session=session, spec=spec, gate="pilot", run=run, principal=who, decision="no_go")

        assert sign(principal(session, "ml@example.test", "ml_lead")).role == "ml_lead"
        # Someone who is team lead and ML lead signs as the role the plan requires.
        assert sign(principal(session, "both@example.test", "lead", "ml_lead")).role == "ml_lead"
        with pytest.raises(service.GateError, match="only the PM, the ML lead and the team lead"):
            sign(principal(session, "lab@example.test", "labeler"))
