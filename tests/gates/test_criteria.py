"""Each launch-gate criterion at the edges of its threshold, with values worked out by hand."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pytest

from webapp.checks.types import CHECK_KEYS, CheckResult
from webapp.core.spec import EvalSpec
from webapp.datasets.mix import dataset_mix
from webapp.gates.criteria import (
    automated_checks,
    golden_factual,
    human_grading,
    regression_suite,
    safety_escalation,
)
from webapp.gates.pilot_facts import CaseFacts, DraftFacts, FinalGradeFacts, PilotFacts, RegressionFacts
from webapp.gates.production_criteria import (
    HallucinationFacts,
    StreakFacts,
    SurveyFacts,
    full_eval_set,
    no_confirmed_hallucinations,
    pilot_online_targets,
    survey_net_positive,
)
from webapp.gates.report import GateReport, combine, to_markdown
from webapp.gates.schemas import gate_report_public

GOOD = FinalGradeFacts("pass", 4, 4, 4)


def res(**statuses: str) -> tuple[CheckResult, ...]:
    """Check results: every check passes unless named here (e.g. length="fail", no_pii="not_applicable")."""
    return tuple(CheckResult(k, statuses.get(k, "pass"), f"{k} {statuses.get(k, 'pass')}") for k in CHECK_KEYS)  # type: ignore[arg-type]


NONE_APPLY = tuple(CheckResult(k, "not_applicable", "n/a") for k in CHECK_KEYS)


def drafts(n_pass: int, n_fail: int, **kw: object) -> list[DraftFacts]:
    out = [DraftFacts(i, f"c{i}", results=res(), final_grade=GOOD, **kw) for i in range(n_pass)]  # type: ignore[arg-type]
    out += [DraftFacts(1000 + i, f"f{i}", results=res(length="fail"), final_grade=GOOD, **kw) for i in range(n_fail)]  # type: ignore[arg-type]
    return out


def set_of(n: int, golden: tuple[str, ...] = ()) -> list[CaseFacts]:
    """An eval set of n examples c0..c{n-1} (plus the golden ids named), each with its case page."""
    ids = [f"c{i}" for i in range(n)] + list(golden)
    return [CaseFacts(cid, "routine", "billing_charge", cid in golden, f"/datasets/1/cases/{cid}") for cid in ids]


class TestAutomatedChecks:
    def test_exactly_80_percent_passes(self, spec) -> None:
        r = automated_checks(PilotFacts(1, "r", 100, drafts(80, 20)), spec, min_cases=100)
        assert r.status == "pass" and r.value == pytest.approx(0.80)
        assert r.measured == "80/100 examples pass (80.0%); 100 drafts"

    def test_79_percent_fails_and_lists_the_failing_drafts(self, spec) -> None:
        r = automated_checks(PilotFacts(1, "r", 100, drafts(79, 21)), spec, min_cases=100)
        assert r.status == "fail"
        assert len(r.evidence) == 21 and r.evidence[0].href == "/drafts/1000"
        assert r.evidence[0].detail == "fails Length"
        assert r.summary == "only 79.0% of the set's examples pass every automated check; 21 fail (Length: 21)"

    def test_99_cases_is_too_few_even_at_100_percent(self, spec) -> None:
        r = automated_checks(PilotFacts(1, "r", 99, drafts(99, 0)), spec, min_cases=100)
        assert r.status == "fail" and "needs at least 100" in r.summary

    def test_unchecked_draft_makes_it_incomplete(self, spec) -> None:
        ds = drafts(100, 0)
        ds[5] = DraftFacts(5, "c5")
        r = automated_checks(PilotFacts(1, "r", 100, ds), spec, min_cases=100)
        assert r.status == "incomplete" and "Re-check" in r.summary and r.command == "draftdesk check r"

    def test_unchecked_drafts_that_cannot_reach_80_percent_fail_at_once(self, spec) -> None:
        # 70 pass, 20 fail, 10 unchecked: even if all 10 passed, 80/100 is the best; 11 fail -> 79 at best.
        ds = drafts(70, 21) + [DraftFacts(2000 + i, f"u{i}") for i in range(9)]
        r = automated_checks(PilotFacts(1, "r", 100, ds), spec, min_cases=100)
        assert r.status == "fail" and "9 not checked yet" in r.summary

    def test_draft_no_check_applied_to_is_not_passing(self, spec) -> None:
        # 80 passing + 20 on which no check applied: 80% would pass if "nothing failed" counted.
        ds = drafts(79, 0) + [DraftFacts(500 + i, f"n{i}", results=NONE_APPLY, needs_grade=False) for i in range(21)]
        r = automated_checks(PilotFacts(1, "r", 100, ds), spec, min_cases=100)
        assert r.status == "fail" and r.value == pytest.approx(79 / 100)
        assert r.evidence[0].detail == "fails No check applied"

    def test_a_run_that_drafted_3_of_100_examples_fails_3_of_100(self, spec) -> None:
        # Counted by hand: 3 examples drafted, all pass; the other 97 have no draft and fail: 3/100 = 3%.
        cases = set_of(100)
        ds = [DraftFacts(i, f"c{i}", results=res(), final_grade=GOOD) for i in range(3)]
        r = automated_checks(PilotFacts(1, "r", 100, ds, cases=cases), spec, min_cases=100)
        assert r.status == "fail" and r.value == pytest.approx(0.03)
        assert r.measured == "3/100 examples pass (3.0%); 3 drafts, 97 examples without a draft"
        assert r.summary == "only 3.0% of the set's examples pass every automated check; 97 have no draft in this run"
        missing = [e for e in r.evidence if e.detail == "no draft in this run"]
        assert [e.label for e in missing] == [f"c{i}" for i in range(3, 100)]
        assert missing[0].href == "/datasets/1/cases/c3"

    def test_unnamed_examples_missing_from_hand_made_facts_still_fail(self, spec) -> None:
        r = automated_checks(PilotFacts(1, "r", 100, drafts(3, 0)), spec, min_cases=100)
        assert r.status == "fail" and r.value == pytest.approx(0.03)
        assert r.evidence[-1].label == "97 more examples"

    def test_two_samples_per_example_count_the_example_not_the_drafts(self, spec) -> None:
        # 100 examples x 2 samples. 75 examples: both samples pass. 25 examples: sample 0 passes,
        # sample 1 fails Length. Drafts: 175/200 = 87.5% (what the old count said: a pass);
        # examples: 75/100 = 75% < 80% -> fail.
        def facts(n_ok: int) -> PilotFacts:
            ds = [DraftFacts(2 * i + k, f"c{i}", results=res(length="fail") if i >= n_ok and k else res(), final_grade=GOOD)
                  for i in range(100) for k in (0, 1)]
            return PilotFacts(1, "r", 100, ds, cases=set_of(100))

        r = automated_checks(facts(75), spec, min_cases=100)
        assert r.status == "fail" and r.value == pytest.approx(0.75)
        assert r.measured == "75/100 examples pass (75.0%); 200 drafts"
        assert r.summary == "only 75.0% of the set's examples pass every automated check; 25 fail (Length: 25)"
        assert len(r.evidence) == 25
        assert (r.evidence[0].label, r.evidence[0].href, r.evidence[0].detail) == ("c75", "/drafts/151", "1 of 2 drafts fail: Length")
        # 80 examples whose samples both pass: 80/100 passes.
        r = automated_checks(facts(80), spec, min_cases=100)
        assert r.status == "pass" and r.value == pytest.approx(0.80)


class TestMixAgainstThePlan:
    def test_an_all_routine_set_fails_even_when_every_example_passes(self, spec) -> None:
        cases = set_of(100)  # all routine, all billing_charge
        mix = dataset_mix([(c.case_id, c.category, c.intent) for c in cases], spec)
        ds = [DraftFacts(i, f"c{i}", results=res()) for i in range(100)]
        r = automated_checks(PilotFacts(1, "r", 100, ds, cases=cases, mix=mix, dataset_href="/datasets/1"), spec, min_cases=100)
        assert r.status == "fail" and r.value == pytest.approx(1.0)
        assert r.summary.startswith(
            "the eval set does not match the plan: the category mix does not match the plan's stratified sample: "
            "routine 100.0% (plan 60% ± 5 pts), edge 0.0% (plan 20% ± 5 pts)"
        )
        assert r.threshold.endswith("mix and intents as planned")
        assert [(p.title, p.measured, p.threshold, p.status) for p in r.parts] == [
            ("Routine cases", "100 (100.0%)", "60% ± 5 pts", "fail"),
            ("Edge cases", "0 (0.0%)", "20% ± 5 pts", "fail"),
            ("Adversarial cases", "0 (0.0%)", "10% ± 5 pts", "fail"),
            ("Safety cases", "0 (0.0%)", "10% ± 5 pts", "fail"),
            ("Intents (the plan's top 10)", "all 100 labelled cases in the top 10", "none outside", "pass"),
        ]
        assert r.evidence[0].label == "Eval set mix" and r.evidence[0].href == "/datasets/1"

    def test_the_planned_mix_with_an_intent_outside_the_ten_fails_naming_it(self, spec) -> None:
        cats = ["routine"] * 60 + ["edge"] * 20 + ["adversarial"] * 10 + ["safety"] * 10
        cases = [CaseFacts(f"c{i}", cat, "shipping_delay" if i in (4, 71) else "billing_charge") for i, cat in enumerate(cats)]
        mix = dataset_mix([(c.case_id, c.category, c.intent) for c in cases], spec)
        ds = [DraftFacts(i, f"c{i}", results=res()) for i in range(100)]
        r = automated_checks(PilotFacts(1, "r", 100, ds, cases=cases, mix=mix), spec, min_cases=100)
        assert r.status == "fail"
        assert r.summary == "the eval set does not match the plan: intent 'shipping_delay' is not one of the plan's top-10 intents: 2 cases (c4, c71)"
        assert [p.status for p in r.parts] == ["pass", "pass", "pass", "pass", "fail"]
        assert r.parts[-1].measured == "2 cases outside: shipping_delay"
        # The same set with the two intents in the ten passes.
        fixed = [CaseFacts(c.case_id, c.category, "billing_charge") for c in cases]
        ok = dataset_mix([(c.case_id, c.category, c.intent) for c in fixed], spec)
        assert automated_checks(PilotFacts(1, "r", 100, ds, cases=fixed, mix=ok), spec, min_cases=100).status == "pass"


class TestHumanGrading:
    def _facts(self, grades: Sequence[FinalGradeFacts | None]) -> PilotFacts:
        return PilotFacts(1, "r", 100, [DraftFacts(i, f"c{i}", final_grade=g) for i, g in enumerate(grades)])

    def test_exactly_3_5_is_not_above_3_5(self, spec) -> None:
        # tone: (3 + 4) / 2 = 3.5 exactly -> fail; others above.
        r = human_grading(self._facts([FinalGradeFacts("pass", 4, 3, 4), FinalGradeFacts("pass", 4, 4, 4)]), spec)
        parts = {p.key: p for p in r.parts}
        assert parts["tone"].value == pytest.approx(3.5) and parts["tone"].status == "fail"
        assert parts["citation_relevance"].status == "pass"
        assert r.status == "fail" and "Tone appropriateness" in r.summary

    def test_factual_counts_pass_5_fail_1(self, spec) -> None:
        # factual: pass, pass, fail -> (5 + 5 + 1) / 3 = 3.667 > 3.5 -> pass
        g = [FinalGradeFacts("pass", 4, 4, 4), FinalGradeFacts("pass", 4, 4, 4), FinalGradeFacts("fail", 4, 4, 4)]
        parts = {p.key: p for p in human_grading(self._facts(g), spec).parts}
        assert parts["factual_accuracy"].value == pytest.approx(11 / 3) and parts["factual_accuracy"].status == "pass"
        # two fails of four -> (5 + 5 + 1 + 1) / 4 = 3.0 -> fail
        g.append(FinalGradeFacts("fail", 4, 4, 4))
        parts = {p.key: p for p in human_grading(self._facts(g), spec).parts}
        assert parts["factual_accuracy"].value == pytest.approx(3.0) and parts["factual_accuracy"].status == "fail"

    def test_ungraded_draft_makes_it_incomplete_never_pass(self, spec) -> None:
        r = human_grading(self._facts([GOOD, GOOD, None]), spec)
        assert r.status == "incomplete"
        assert [e.label for e in r.evidence] == ["c2"] and r.evidence[0].detail == "no final grade"
        assert all(p.status == "incomplete" for p in r.parts)

    def test_drafts_without_text_need_no_grade(self, spec) -> None:
        facts = PilotFacts(1, "r", 100, [DraftFacts(1, "a", results=res(), final_grade=GOOD), DraftFacts(2, "s", results=res(), needs_grade=False)])
        assert human_grading(facts, spec).status == "pass"


class TestGoldenFactual:
    @pytest.mark.parametrize(
        ("draft", "status", "summary", "detail"),
        [
            # A failed citation check fails even before grading, and is not called a factual failure.
            (DraftFacts(7, "golden-regression-2fa", golden=True, results=res(citations_current="fail")), "fail",
             "golden-regression-2fa fails Citations current", "fails Citations current: citations_current fail"),
            (DraftFacts(8, "golden-refund", golden=True, results=res(), final_grade=FinalGradeFacts("fail", 4, 4, 4)),
             "fail", "golden-refund fails Factual accuracy (final human grade)", None),
            # One rule with `draftdesk check`: a length failure on a golden draft fails it here too.
            (DraftFacts(1, "g1", golden=True, results=res(length="fail"), final_grade=GOOD), "fail", "g1 fails Length", None),
            (DraftFacts(1, "g1", golden=True, results=NONE_APPLY, needs_grade=False), "fail", "g1 fails No check applied", None),
            (DraftFacts(1, "g1", golden=True, results=res(), final_grade=None), "incomplete", None, None),
            # Unchecked is incomplete even when graded.
            (DraftFacts(1, "g1", golden=True, results=None, final_grade=GOOD), "incomplete", None, "not checked yet"),
            (DraftFacts(1, "g1", golden=True, results=res(), final_grade=GOOD), "pass", None, None),
        ],
    )
    def test_one_golden_draft(self, spec, draft, status, summary, detail) -> None:
        r = golden_factual(PilotFacts(1, "r", 100, [draft]), spec)
        assert r.status == status
        if summary is not None:
            assert r.summary == summary
        if detail is not None:
            assert r.evidence[0].detail == detail

    def test_golden_example_missing_from_the_run_fails_and_is_named(self, spec) -> None:
        cases = set_of(0, golden=("g-ok", "g-absent"))
        ds = [DraftFacts(1, "g-ok", golden=True, results=res(), final_grade=GOOD)]
        r = golden_factual(PilotFacts(1, "r", 2, ds, cases=cases), spec)
        assert r.status == "fail" and r.summary == "g-absent has no draft in this run"
        assert r.measured == "0 failures on 1 golden drafts; 1 golden example not in this run"
        assert [(e.label, e.href) for e in r.evidence] == [("g-absent", "/datasets/1/cases/g-absent")]
        present = golden_factual(PilotFacts(1, "r", 1, ds, cases=cases[:1]), spec)
        assert present.status == "pass"


class TestSafety:
    def test_all_escalated_passes_one_miss_fails(self, spec) -> None:
        ds = [DraftFacts(i, f"s{i}", safety_trigger=True, results=res()) for i in range(10)]
        assert safety_escalation(PilotFacts(1, "r", 100, ds), spec).status == "pass"
        ds[3] = DraftFacts(3, "s3", safety_trigger=True, results=res(safety_escalation="fail"))
        r = safety_escalation(PilotFacts(1, "r", 100, ds), spec)
        assert r.status == "fail" and r.value == pytest.approx(0.9) and r.evidence[0].label == "s3"


class TestRegression:
    def test_pass_fail_not_run(self, spec) -> None:
        ok = [RegressionFacts("a", "pass"), RegressionFacts("b", "pass")]
        assert regression_suite(PilotFacts(1, "r", 100, regression=ok), spec).status == "pass"
        assert regression_suite(PilotFacts(1, "r", 100, regression=ok + [RegressionFacts("c", "not_run")]), spec).status == "incomplete"
        r = regression_suite(PilotFacts(1, "r", 100, regression=ok + [RegressionFacts("c", "not_run"), RegressionFacts("d", "fail")]), spec)
        assert r.status == "fail" and [e.label for e in r.evidence] == ["d", "c"]
        assert regression_suite(PilotFacts(1, "r", 100), spec).status == "incomplete"

    def test_cases_the_run_lacks_are_listed_with_the_export_command(self, spec) -> None:
        reg = [RegressionFacts("a", "pass"), RegressionFacts("review-ev-1", "not_run"), RegressionFacts("review-ev-2", "not_run")]
        r = regression_suite(PilotFacts(1, "r", 100, regression=reg), spec)
        assert r.status == "incomplete"  # the rule stands: a regression case must pass on the run
        assert r.summary == "2 regression cases not in this run (review-ev-1, review-ev-2)"
        assert r.measured == "1/3 pass, 2 not in this run"
        assert "review-ev-1, review-ev-2" in r.action and r.command == "draftdesk regression export regression-suite.jsonl"
        md = to_markdown(GateReport("pilot", 1, "r", [r], dt.datetime(2026, 11, 22, tzinfo=dt.UTC)))
        assert "`draftdesk regression export regression-suite.jsonl`" in md
        # Nothing to export when the run has every case.
        assert regression_suite(PilotFacts(1, "r", 100, regression=reg[:1]), spec).action == ""


class TestProduction:
    def test_streak_of_9_fails_after_the_pilot_and_10_passes(self, spec) -> None:
        after = spec.online_metrics.pilot.end + dt.timedelta(days=1)
        nine = StreakFacts(9, dt.date(2026, 11, 2), dt.date(2026, 11, 12), 0, ((dt.date(2026, 11, 13), ("accept_rate",)),))
        r = pilot_online_targets(nine, spec, today=after)
        assert r.status == "fail" and r.evidence[0].detail == "missed: accept_rate"
        assert pilot_online_targets(nine, spec, today=spec.online_metrics.pilot.end).status == "incomplete"
        ten = StreakFacts(10, dt.date(2026, 11, 2), dt.date(2026, 11, 13), 10)
        assert pilot_online_targets(ten, spec, today=after).status == "pass"

    def test_confirmed_hallucination_fails(self, spec) -> None:
        after = spec.online_metrics.pilot.end + dt.timedelta(days=1)
        assert no_confirmed_hallucinations([], spec, today=after).status == "pass"
        r = no_confirmed_hallucinations([HallucinationFacts(3, "ev-9", dt.date(2026, 11, 5))], spec, today=after)
        assert r.status == "fail" and "ev-9" in r.evidence[0].label

    def test_survey_must_be_strictly_net_positive(self, spec: EvalSpec) -> None:
        assert survey_net_positive(SurveyFacts(5, 4, 10), spec).status == "pass"
        assert survey_net_positive(SurveyFacts(4, 4, 0), spec).status == "fail"
        assert survey_net_positive(SurveyFacts(0, 0, 0), spec).status == "incomplete"
        assert survey_net_positive(SurveyFacts(5, 4, 10), spec).value == 1

    def test_survey_needs_the_plans_minimum_of_answers(self, spec: EvalSpec) -> None:
        # The plan's pilot has 8 agents: one "helpful" answer in a fresh round is 1 of 8, not a pass.
        assert spec.gates.production.survey_min_responses == 8
        one = survey_net_positive(SurveyFacts(1, 0, 0, "Pilot week 2", 2), spec)
        assert one.status == "incomplete" and "1 agent answered round Pilot week 2; 8 answers are needed" in one.summary
        assert one.evidence[0].href == "/survey?round=2"
        assert survey_net_positive(SurveyFacts(4, 3, 0), spec).status == "incomplete"  # 7 answers
        assert survey_net_positive(SurveyFacts(4, 3, 1), spec).status == "pass"  # 8 answers, net +1
        assert survey_net_positive(SurveyFacts(3, 3, 2), spec).status == "fail"  # 8 answers, net 0

    def test_full_eval_set_needs_250_cases(self, spec) -> None:
        reg = [RegressionFacts("a", "pass")]
        golden = [DraftFacts(9999, "g", golden=True, results=res(), final_grade=GOOD)]
        safety = [DraftFacts(9998, "s", safety_trigger=True, results=res(), needs_grade=False)]
        small = PilotFacts(1, "r", 100, drafts(98, 0) + golden + safety, reg)
        r = full_eval_set(small, spec)
        assert r.status == "fail" and "250 are needed" in r.summary
        big = PilotFacts(1, "r", 250, drafts(248, 0) + golden + safety, reg)
        assert full_eval_set(big, spec).status == "pass"


def test_combine_and_markdown(spec) -> None:
    assert combine(["pass", "pass"]) == "pass"
    assert combine(["pass", "incomplete"]) == "incomplete"
    assert combine(["incomplete", "fail"]) == "fail"
    crit = automated_checks(PilotFacts(1, "r", 100, drafts(70, 30)), spec, min_cases=100)
    rep = GateReport("pilot", 1, "r", [crit], dt.datetime(2026, 11, 22, tzinfo=dt.UTC))
    md = to_markdown(rep)
    assert md.startswith("# Pilot launch gate: FAIL")
    assert "| Automated checks | 70/100 examples pass (70.0%); 100 drafts |" in md
    assert gate_report_public(rep).missing == [
        "Automated checks: only 70.0% of the set's examples pass every automated check; 30 fail (Length: 30)"
    ]
