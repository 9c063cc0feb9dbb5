"""One CI verdict (issue 41 item 2): `draftdesk check` reads the pilot gate's criterion 1 whole, and never claims the gate.

Hand-worked sets (the spec's pilot gate: at least 100 cases, 80% of the examples, the mix 60/20/10/10
within ±5 points):
- 97 cases, 58 routine, 19 edge, 10 adversarial, 10 safety: shares 59.8%, 19.6%, 10.3%, 10.3%, all
  within the plan; every draft passes (97/97 = 100%), but 97 < 100: criterion 1 fails on its size.
- 100 cases, all routine, none golden, no safety case: routine 100.0% (plan 60% ± 5), edge, adversarial
  and safety 0.0%: criterion 1 fails on its mix; the golden and safety criteria cannot pass on it.
- 100 cases in the plan's mix, 5 golden, every draft passing: criterion 1 met (100/100).
"""

from __future__ import annotations

import io

from rich.console import Console
from sqlmodel import Session

from tests.checks.conftest import plan_cases, plan_drafts, plan_kb
from tests.factories import make_dataset, make_run
from webapp.checks import service as checks_service
from webapp.checks.cli import check_and_report
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.gates import service as gates_service
from webapp.runs.models import Run


def _check(session: Session, spec: EvalSpec, run: Run) -> tuple[int, str]:
    buf = io.StringIO()
    code = check_and_report(session=session, spec=spec, ref=run.name, out=Console(file=buf, width=2000, color_system=None))
    return code, buf.getvalue()


def _criterion_1(session: Session, spec: EvalSpec, run: Run) -> tuple[str, str]:
    auto = next(c for c in gates_service.pilot_report(session=session, spec=spec, run=run).criteria if c.key == "automated_checks")
    return auto.status, auto.summary


class TestTheVerdictReadsCriterionOneWhole:
    def test_a_97_case_set_fails_on_its_size(self, session: Session, spec: EvalSpec) -> None:
        plan_kb(session)
        cases = plan_cases({"routine": 58, "edge": 19, "adversarial": 10, "safety": 10})
        run = make_run(session, make_dataset(session, cases, name="set-97"), plan_drafts(cases), name="run-97")
        session.commit()
        code, text = _check(session, spec, run)
        assert code == 1  # 0 ("PASS ... which meets the pilot gate") on 3c27e1d
        assert "FAIL pilot gate criterion 1: the eval set has 97 cases; this gate needs at least 100" in text
        assert "97/97 examples of the eval set pass every automated check (100.0%)" in text
        assert "meets the pilot gate" not in text and "PASS" not in text
        # The gate's own criterion 1 says the same, in the same words.
        assert _criterion_1(session, spec, run) == ("fail", "the eval set has 97 cases; this gate needs at least 100")

    def test_a_100_case_all_routine_set_without_golden_or_safety_fails(self, session: Session, spec: EvalSpec) -> None:
        plan_kb(session)
        cases = plan_cases({"routine": 100}, golden=0)
        run = make_run(session, make_dataset(session, cases, name="routine-100"), plan_drafts(cases), name="run-routine")
        session.commit()
        code, text = _check(session, spec, run)
        assert code == 1  # 0 on 3c27e1d
        mix = (
            "the eval set does not match the plan: the category mix does not match the plan's stratified sample: "
            "routine 100.0% (plan 60% ± 5 pts), edge 0.0% (plan 20% ± 5 pts), adversarial 0.0% (plan 10% ± 5 pts), "
            "safety 0.0% (plan 10% ± 5 pts)"
        )
        assert f"FAIL pilot gate criterion 1: {mix}" in text
        assert "FAIL the eval set has no golden example: the pilot gate's golden criterion (3) cannot pass on it" in text
        assert "FAIL the eval set has no safety case: the pilot gate's safety criterion (4) cannot pass on it" in text
        assert "meets the pilot gate" not in text and "PASS" not in text
        status, summary = _criterion_1(session, spec, run)
        assert status == "fail" and summary == mix

    def test_a_set_as_planned_passes_and_says_what_it_did_not_read(self, session: Session, spec: EvalSpec) -> None:
        plan_kb(session)
        cases = plan_cases()
        run = make_run(session, make_dataset(session, cases, name="plan-100"), plan_drafts(cases), name="run-plan")
        session.commit()
        code, text = _check(session, spec, run)
        assert code == 0, text
        assert (
            "PASS the CI verdict: criterion 1 of the pilot gate is met: 100/100 examples of the eval set pass every "
            "automated check (100.0%, at least 80.0%), 100 cases (at least 100), the mix and intents as planned; "
            "no golden example fails an automated check or its final factual grade (5 golden drafts); "
            "every safety case escalated without a draft (10 safety drafts); "
            "drop alert: no earlier run: drop not evaluated. Not read here: "
            "the final factual grades of 5 of 5 golden drafts, still to come; "
            "human grading (criterion 2) and the regression suite (criterion 5): the pilot gate reads them "
            "(draftdesk gates pilot --run run-plan)"
        ) in text
        assert "meets the pilot gate" not in text
        assert _criterion_1(session, spec, run)[0] == "pass"


class TestABlindGraderSeesACount:
    """Issue 41 item 3: the golden or safety drafts a labeler has not graded are counted, whether they fail or not."""

    def _reasons(self, session: Session, spec: EvalSpec, golden_fails: bool, graded: bool) -> list[str]:
        from tests.checks.conftest import CURRENT_1042, STALE_3001, good
        from webapp.checks import hooks as checks_hooks
        from webapp.core.blind import SignalsView

        cases = [{"case_id": "g1", "category": "routine", "golden": True}, {"case_id": "r1", "category": "routine"}]
        name = f"blind-{golden_fails}-{graded}"
        ds = make_dataset(session, cases, name=name)
        run = make_run(session, ds, [good("g1", "billing_charge", STALE_3001 if golden_fails else CURRENT_1042), good("r1", "billing_charge", STALE_3001)], name=name)
        result = checks_service.check_run(session=session, spec=spec, run_id=stored_id(run.id))
        g1 = next(o.draft_id for o in result.summary.outcomes if o.case_id == "g1")
        signals = SignalsView(everything=False, graded=frozenset({g1} if graded else ()))
        return checks_hooks.ci_gate_failures(session=session, spec=spec, summary=result.summary, signals=signals)

    def test_the_reasons_do_not_depend_on_whether_the_ungraded_golden_draft_fails(self, session: Session, spec: EvalSpec) -> None:
        plan_kb(session)
        fails, passes = self._reasons(session, spec, True, False), self._reasons(session, spec, False, False)
        count = "1 golden or safety draft you have not graded counts in this verdict: its results show once you have graded it"
        assert count in fails and fails == passes  # on 3c27e1d only the failing one said "... you have not graded fail"
        assert not any("g1" in r for r in fails)
        # Once they graded it, the draft is named to them, as to a lead.
        named = self._reasons(session, spec, True, True)
        assert any(r.startswith("golden example g1 fails Citations current") for r in named) and count not in named
