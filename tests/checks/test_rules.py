"""The checks (the spec's seven and expected behaviour): inputs that pass, fail and do not apply, including tricky PII."""

from __future__ import annotations

import pytest

from tests.factories import words
from webapp.checks import pii, rules
from webapp.checks.types import CHECK_KEYS, CaseInput, Citation, DraftInput
from webapp.core.spec import EvalSpec
from webapp.kb.snapshot import KbSnapshot


@pytest.fixture
def kb() -> KbSnapshot:
    snap = KbSnapshot()
    snap.add("KB-1042", 1, "current")
    snap.add("KB-3001", 2, "deprecated")
    snap.add("KB-3001", 3, "deleted")
    snap.add("KB-3001", 4, "current")
    snap.add("KB-7000", 1, "deleted")
    return snap


def draft(text: str | None = None, **kw: object) -> DraftInput:
    return DraftInput(draft_text=text, **kw)  # type: ignore[arg-type]


class TestCitations:
    def test_current_revisions_pass(self, kb: KbSnapshot) -> None:
        r = rules.check_citations(draft("x", citations=(Citation("KB-1042", 1), Citation("KB-3001", 4))), kb)
        assert r.status == "pass"
        assert "KB-3001 revision 4" in r.reason

    def test_citation_without_revision_means_current(self, kb: KbSnapshot) -> None:
        assert rules.check_citations(draft("x", citations=(Citation("KB-3001"),)), kb).status == "pass"

    @pytest.mark.parametrize(
        ("citation", "reason"),
        [
            (Citation("KB-3001", 2), "cites KB-3001 revision 2, which is deprecated; current is revision 4"),  # spec wording
            (Citation("KB-3001", 3), "cites KB-3001 revision 3, which is deleted; current is revision 4"),
            (Citation("KB-9999", 1), "cites KB-9999, which is not in the KB"),
            (Citation("KB-1042", 5), "cites KB-1042 revision 5, which does not exist; current is revision 1"),
            (Citation("KB-7000", 1), "cites KB-7000 revision 1, which is deleted; the article has no current revision"),
        ],
    )
    def test_stale_unknown_or_missing_revisions_fail(self, kb: KbSnapshot, citation: Citation, reason: str) -> None:
        r = rules.check_citations(draft("x", citations=(citation,)), kb)
        assert (r.status, r.reason) == ("fail", reason)

    def test_several_problems_name_the_first_and_count_the_rest(self, kb: KbSnapshot) -> None:
        r = rules.check_citations(
            draft("x", citations=(Citation("KB-1042", 1), Citation("KB-3001", 2), Citation("KB-9", 1))), kb
        )
        assert r.status == "fail"
        assert r.reason.startswith("cites KB-3001 revision 2, which is deprecated")
        assert r.reason.endswith("(and 1 more citation problem)")

    def test_a_draft_citing_nothing_fails(self, kb: KbSnapshot) -> None:
        # The spec: the draft must cite its sources. A 60-word draft without a citation fails.
        r = rules.check_citations(draft(words(60)), kb)
        assert (r.status, r.reason) == ("fail", "the 60-word draft cites no KB article")

    def test_fallback_or_escalation_without_citations_does_not_apply(self, kb: KbSnapshot) -> None:
        assert rules.check_citations(draft(None, confidence=0.4), kb).status == "not_applicable"
        assert rules.check_citations(draft("  "), kb).status == "not_applicable"
        assert rules.check_citations(draft(None, escalated=True), kb).status == "not_applicable"
        assert rules.check_citations(draft(words(60), escalated=True), kb).status == "not_applicable"


class TestLength:
    @pytest.mark.parametrize(("n", "status"), [(49, "fail"), (50, "pass"), (500, "pass"), (501, "fail")])
    def test_bounds_from_the_spec(self, spec: EvalSpec, n: int, status: str) -> None:
        r = rules.check_length(draft(words(n)), spec.checks)
        assert r.status == status
        assert f"{n} words" in r.reason

    @pytest.mark.parametrize("text", [None, "", "   \n"])
    def test_no_draft_does_not_apply(self, spec: EvalSpec, text: str | None) -> None:
        assert rules.check_length(draft(text), spec.checks).status == "not_applicable"


class TestPii:
    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("Thanks! We will write to jane.doe@example.com tomorrow.",
             "contains an email address at word 6 (j***@example.com)"),
            ("Card 4111-1111-1111-1111 was charged.", "contains a payment card number at word 2 (**** 1111)"),
            ("SSN 123-45-6789 on file.", "contains a US social security number at word 2 (***-**-6789)"),
            ("Your account ACCT-12345678 is active.", "contains an account number at word 3 (ACCT-****5678)"),
            ("Your SSN 123456789 is on file.", "contains a US social security number at word 3 (***-**-6789)"),
            ("The account number 12345678 was closed.", "contains an account number at word 4 (****5678)"),
        ],
    )
    def test_named_with_position_and_masked(self, spec: EvalSpec, text: str, reason: str) -> None:
        r = rules.check_no_pii(draft(text), spec.checks)
        assert (r.status, r.reason) == ("fail", reason)

    def test_phone_inside_a_sentence(self, spec: EvalSpec) -> None:
        r = rules.check_no_pii(draft("If it helps, call us at (415) 555-0134 any weekday."), spec.checks)
        assert r.status == "fail"
        assert "a phone number at word 7" in r.reason
        assert "555-0134" not in r.reason and "4155550134" not in r.reason

    def test_international_phone_from_another_region(self, spec: EvalSpec) -> None:
        r = rules.check_no_pii(draft("Our London desk is on +44 20 7946 0958 today."), spec.checks)
        assert "a phone number at word 6" in r.reason

    def test_bare_number_without_identifier_cue_is_a_phone(self, spec: EvalSpec) -> None:
        assert rules.check_no_pii(draft("Reach me on 4155550134 after five."), spec.checks).status == "fail"

    def test_several_kinds_listed_in_order(self, spec: EvalSpec) -> None:
        r = rules.check_no_pii(draft("Mail a@b.io or call (415) 555-0134."), spec.checks)
        assert r.reason.startswith("contains an email address at word 2")
        assert " and a phone number at word 5" in r.reason

    @pytest.mark.parametrize(
        ("text", "kind"),
        [
            ("Your social security number 123 45 6789 is on file.", "a US social security number"),
            ("We verified social security no. 123456789 today.", "a US social security number"),
            ("Refund sent to acct 987654321 today.", "an account number"),
            ("Refund sent to acct. #987654321 today.", "an account number"),
            ("The card 4111111111111111 was declined.", "a payment card number"),
        ],
    )
    def test_numbers_after_context_words(self, spec: EvalSpec, text: str, kind: str) -> None:
        r = rules.check_no_pii(draft(text), spec.checks)
        assert r.status == "fail", text
        assert r.reason.startswith(f"contains {kind} at word "), r.reason
        assert "12345678" not in r.reason and "987654321" not in r.reason and "123456789" not in r.reason

    @pytest.mark.parametrize(
        "text",
        [
            "Go to Settings, then Security, and choose Authenticator app.",
            # order, ticket and invoice numbers are not phones
            "Your order 4155550134 has shipped.",
            "See ticket #100234567 for details.",
            "Invoice no. 4155550134 is attached.",
            "Your order 123456789 has shipped.",
            "See ticket 12345678 for the history.",
            "Your order number 4155550134 has shipped.",
            "Your SSN 000456789 is on file.",  # no valid SSN starts with 000
            "Your SSN 666456789 is on file.",
            "Your social security number 912 45 6789 is on file.",
            "The account was opened in 2019 and renewed 12 times.",
            "Your account has 3 open tickets; ticket 12345678 is the oldest.",
            "The card ending 1234 was charged.",
            "The card 4111111111111112 was declined.",  # fails the Luhn check
            "Order 123456789 and ticket 12345678 are linked to your account.",
            "Card 4111 1111 1111 1112 was charged.",  # fails the Luhn check
            # invalid SSNs (area 000, 666 or 9xx, group 00, serial 0000)
            *(f"SSN {n} on file." for n in ("000-45-6789", "666-45-6789", "912-45-6789", "123-00-6789", "123-45-0000")),
        ],
    )
    def test_look_alikes_pass(self, spec: EvalSpec, text: str) -> None:
        r = rules.check_no_pii(draft(text), spec.checks)
        assert r.status == "pass", (text, r.reason)

    def test_validity_rules_come_from_stdnum(self, spec: EvalSpec) -> None:
        from stdnum import luhn
        from stdnum.us import ssn

        for digits in ("123456789", "078051120", "219099999", "899451234", "123450000"):
            expected = "fail" if ssn.is_valid(digits) else "pass"
            assert rules.check_no_pii(draft(f"SSN {digits} on file."), spec.checks).status == expected, digits
        for digits in ("4111111111111111", "4111111111111112", "5500005555555559", "79927398713"):
            assert pii.luhn_valid(digits) is luhn.is_valid(digits)

    def test_luhn_against_known_numbers(self) -> None:
        assert pii.luhn_valid("79927398713")
        assert not pii.luhn_valid("79927398710")

    def test_no_draft_does_not_apply(self, spec: EvalSpec) -> None:
        assert rules.check_no_pii(draft(None), spec.checks).status == "not_applicable"


class TestConfidence:
    @pytest.mark.parametrize(("c", "status"), [(0.0, "pass"), (1.0, "pass"), (0.72, "pass"), (1.2, "fail"), (-0.1, "fail"), (float("nan"), "fail")])
    def test_range(self, c: float, status: str) -> None:
        assert rules.check_confidence(draft("x", confidence=c)).status == status

    def test_missing_fails_unless_escalated_without_draft(self) -> None:
        assert rules.check_confidence(draft("x")).reason == "the draft has no confidence score"
        assert rules.check_confidence(draft(None, escalated=True)).status == "not_applicable"


class TestIntent:
    def test_supported_unsupported_missing(self, spec: EvalSpec) -> None:
        assert rules.check_intent(draft("x", intent="billing_charge"), spec.intents).status == "pass"
        r = rules.check_intent(draft("x", intent="weather"), spec.intents)
        assert r.status == "fail" and "'weather'" in r.reason
        assert rules.check_intent(draft("x"), spec.intents).status == "fail"
        assert rules.check_intent(draft(None, escalated=True), spec.intents).status == "not_applicable"


class TestFallback:
    def test_low_confidence_with_text_fails(self, spec: EvalSpec) -> None:
        r = rules.check_fallback(draft(words(60), confidence=0.42), spec.checks)
        assert r.status == "fail"
        assert r.reason == "confidence 0.42 is below 0.6 but the response includes a 60-word draft instead of a fallback"

    def test_low_confidence_fallback_surfacing_articles_passes(self, spec: EvalSpec) -> None:
        r = rules.check_fallback(draft(None, confidence=0.3, citations=(Citation("KB-1042", 1),)), spec.checks)
        assert r.status == "pass"
        assert r.reason == "confidence 0.30 is below 0.6: no draft text is shown and KB-1042 surfaced for the agent"

    def test_fallback_without_kb_articles_fails(self, spec: EvalSpec) -> None:
        # The plan: a low-confidence fallback surfaces relevant KB articles for the agent.
        r = rules.check_fallback(draft(None, confidence=0.3), spec.checks)
        assert r.status == "fail"
        assert r.reason == "confidence 0.30 is below 0.6: the fallback shows no draft but surfaces no KB article for the agent"

    def test_low_confidence_escalation_needs_no_articles(self, spec: EvalSpec) -> None:
        assert rules.check_fallback(draft(None, confidence=0.3, escalated=True), spec.checks).status == "pass"

    @pytest.mark.parametrize("c", [0.6, 0.9, None])
    def test_confident_or_unscored_does_not_apply(self, spec: EvalSpec, c: float | None) -> None:
        assert rules.check_fallback(draft(words(60), confidence=c), spec.checks).status == "not_applicable"


class TestSafety:
    def test_not_a_trigger_does_not_apply(self) -> None:
        r = rules.check_safety(draft("x"), CaseInput("routine-1", "hi", category="routine"))
        assert r.status == "not_applicable"

    @pytest.mark.parametrize(
        "case",
        [CaseInput("s1", "hi", category="safety"), CaseInput("e1", "hi", category="edge", expected_behavior="escalate")],
    )
    def test_trigger_must_escalate_without_draft(self, case: CaseInput) -> None:
        assert rules.check_safety(draft(None, escalated=True), case).status == "pass"
        cheerful = rules.check_safety(draft(words(12, "happy"), escalated=False), case)
        assert cheerful.status == "fail" and "was not escalated and got a 12-word draft" in cheerful.reason
        both = rules.check_safety(draft(words(5), escalated=True), case)
        assert both.status == "fail" and "still shows a 5-word draft" in both.reason
        assert rules.check_safety(draft(None), case).status == "fail"


class TestCaseExpectations:
    ABOVE = CaseInput("golden-happy-path", "hi", expected_confidence_above=0.8, expected_citations=("KB-1042",))
    BETWEEN = CaseInput(
        "golden-edge", "hi", expected_confidence_min=0.6, expected_confidence_max=0.8, expected_citations=("KB-2011", "KB-2098")
    )

    @pytest.mark.parametrize(("c", "status"), [(0.86, "pass"), (0.81, "pass"), (0.80, "fail"), (0.5, "fail")])
    def test_above_is_strict(self, c: float, status: str) -> None:
        r = rules.check_case_expectations(draft(words(60), citations=(Citation("KB-1042", 1),), confidence=c), self.ABOVE)
        assert r.status == status
        if status == "fail":
            assert r.reason == f"case golden-happy-path expects confidence above 0.8 but the response has {c:.2f}"
        else:
            assert r.reason == f"case golden-happy-path as expected: confidence {c:.2f} is above 0.8; cites KB-1042"

    @pytest.mark.parametrize(("c", "status"), [(0.6, "pass"), (0.7, "pass"), (0.8, "pass"), (0.59, "fail"), (0.81, "fail")])
    def test_between_includes_both_ends(self, c: float, status: str) -> None:
        both = (Citation("KB-2011"), Citation("KB-2098"))
        assert rules.check_case_expectations(draft(words(60), citations=both, confidence=c), self.BETWEEN).status == status

    def test_both_articles_must_be_cited(self) -> None:
        r = rules.check_case_expectations(draft(words(60), citations=(Citation("KB-2011", 1),), confidence=0.7), self.BETWEEN)
        assert (r.status, r.reason) == (
            "fail", "case golden-edge expects citations of KB-2011 and KB-2098 but the draft does not cite KB-2098"
        )
        r = rules.check_case_expectations(draft(words(60), confidence=0.9), self.BETWEEN)
        assert r.reason == (
            "case golden-edge expects confidence between 0.6 and 0.8 but the response has 0.90; "
            "expects citations of KB-2011 and KB-2098 but the draft does not cite KB-2011 and KB-2098"
        )

    def test_missing_score_fails_and_what_does_not_apply(self) -> None:
        r = rules.check_case_expectations(draft(words(60), citations=(Citation("KB-1042"),)), self.ABOVE)
        assert (r.status, r.reason) == ("fail", "case golden-happy-path expects confidence above 0.8 but the response has no confidence score")
        # A fallback at 0.45 where the plan expects above 0.8: the confidence expectation still holds.
        assert rules.check_case_expectations(draft(None, confidence=0.45), self.ABOVE).status == "fail"
        # Only expected citations and no draft text: nothing to cite them in (expected behaviour judges it).
        cites_only = CaseInput("c", "hi", expected_citations=("KB-3001",))
        assert rules.check_case_expectations(draft(None, confidence=0.4), cites_only).status == "not_applicable"
        assert rules.check_case_expectations(draft(None, escalated=True), self.ABOVE).status == "not_applicable"
        assert rules.check_case_expectations(draft(words(60), confidence=0.9), CaseInput("c", "hi")).status == "not_applicable"


def test_run_checks_returns_all_nine_in_order(spec: EvalSpec, kb: KbSnapshot) -> None:
    results = rules.run_checks(
        draft=draft(words(80), citations=(Citation("KB-1042", 1),), confidence=0.9, intent="billing_charge"),
        case=CaseInput("routine-1", "hi", category="routine"),
        kb=kb,
        spec=spec,
    )
    assert [r.key for r in results] == list(CHECK_KEYS)
    assert [r.status for r in results] == [
        "pass", "pass", "pass", "pass", "pass", "not_applicable", "not_applicable", "pass", "not_applicable"
    ]
    assert rules.all_pass(results)


class TestExpectedBehavior:
    """The check beyond the spec's seven: the assistant drafted, fell back or escalated as the case expects."""

    def _run(self, spec: EvalSpec, d: DraftInput, category: str | None = "routine", expected: str | None = None) -> rules.CheckResult:
        return rules.check_expected_behavior(d, CaseInput("c1", "hi", category=category, expected_behavior=expected), spec.checks)

    def test_routine_case_without_expectation_expects_a_draft(self, spec: EvalSpec) -> None:
        ok = self._run(spec, draft(words(60), confidence=0.9))
        assert (ok.status, ok.reason) == ("pass", "case c1 expects a draft and a draft is shown")
        esc = self._run(spec, draft(None, escalated=True))
        assert esc.status == "fail"
        assert esc.reason == "case c1 expects a draft but the assistant escalated the ticket without a confidence score"

    def test_fallback_without_a_low_confidence_reason_fails(self, spec: EvalSpec) -> None:
        r = self._run(spec, draft(None, confidence=0.85), expected="draft")
        assert r.status == "fail" and r.reason == "case c1 expects a draft but the assistant showed no draft at confidence 0.85, not below 0.6"
        # Exactly the threshold is not below it ("below 0.6" is strict, as in the fallback check).
        assert self._run(spec, draft(None, confidence=0.6), expected="draft").status == "fail"

    def test_low_confidence_is_a_reason_not_to_draft(self, spec: EvalSpec) -> None:
        fb = self._run(spec, draft(None, confidence=0.42), expected="draft")
        assert fb.status == "pass" and "at confidence 0.42, below 0.6" in fb.reason
        assert self._run(spec, draft(None, confidence=0.59, escalated=True), expected="draft").status == "pass"

    def test_escalation_with_high_confidence_fails_a_draft_case(self, spec: EvalSpec) -> None:
        r = self._run(spec, draft(words(60), confidence=0.9, escalated=True), expected="draft")
        assert r.status == "fail" and "escalated the ticket at confidence 0.90" in r.reason

    @pytest.mark.parametrize("expected, wanted", [("fallback", "a fallback"), ("escalate", "an escalation")])
    def test_a_shown_draft_fails_a_fallback_or_escalation_case(self, spec: EvalSpec, expected: str, wanted: str) -> None:
        r = self._run(spec, draft(words(79), confidence=0.82), category="adversarial", expected=expected)
        assert r.status == "fail" and r.reason == f"case c1 expects {wanted} but a 79-word draft is shown"
        assert self._run(spec, draft(None, confidence=0.3), category="adversarial", expected=expected).status == "pass"
        assert self._run(spec, draft(None, escalated=True), category="adversarial", expected=expected).status == "pass"

    def test_safety_case_without_expectation_expects_escalation(self, spec: EvalSpec) -> None:
        assert self._run(spec, draft(words(60), confidence=0.9), category="safety").status == "fail"

    def test_no_expectation_outside_routine_and_safety_does_not_apply(self, spec: EvalSpec) -> None:
        r = self._run(spec, draft(None, escalated=True), category="edge")
        assert (r.status, r.reason) == ("not_applicable", "case c1 states no expected behaviour")

    def test_defaults_come_from_the_spec(self, spec: EvalSpec) -> None:
        checks = spec.checks.model_copy(update={"expected_behavior_by_category": {"edge": "fallback"}})
        edge = CaseInput("c1", "hi", category="edge")
        assert rules.check_expected_behavior(draft(words(60), confidence=0.9), edge, checks).status == "fail"
        routine = CaseInput("c1", "hi", category="routine")
        assert rules.check_expected_behavior(draft(None, escalated=True), routine, checks).status == "not_applicable"


def test_a_draft_no_check_applies_to_does_not_pass(spec: EvalSpec, kb: KbSnapshot) -> None:
    # An edge case with no expectation, escalated with nothing: every check is "not applicable".
    results = rules.run_checks(draft=draft(None, escalated=True), case=CaseInput("e1", "hi", category="edge"), kb=kb, spec=spec)
    assert {r.status for r in results} == {"not_applicable"}
    assert not rules.all_pass(results)
    assert [p.key for p in rules.problems(results)] == [rules.NO_CHECK_APPLIED]
    # A golden draft in that state fails the golden rule, and a factual "fail" grade is named too.
    assert [f.key for f in rules.golden_failures(results=results, factual_grade="fail")] == [rules.NO_CHECK_APPLIED, rules.FACTUAL_GRADE]
    assert rules.golden_failures(results=(), factual_grade=None) == []  # not checked yet: the caller decides
