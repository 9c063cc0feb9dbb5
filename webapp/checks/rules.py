"""The spec's seven automated checks, and one beyond them, as pure functions over webapp/checks/types.py.

Each check returns a CheckResult with status pass, fail or not_applicable and a one-sentence
reason that names the offending thing. Parameters (word limits, fallback threshold, PII kinds,
account-number pattern, phone regions, supported intents) come from the EvalSpec, so the
dashboard and prompt-evaluator run the same code with the same plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from webapp.checks.pii import PII_LABELS, find_pii
from webapp.checks.types import CHECK_KEYS, CaseInput, CheckResult, Citation, DraftInput
from webapp.core.spec import ChecksSpec, EvalSpec
from webapp.kb.snapshot import KbSnapshot

CHECK_LABELS: dict[str, str] = {
    "citations_current": "Citations current",
    "length": "Length",
    "no_pii": "No PII",
    "confidence_present": "Confidence present",
    "intent_supported": "Intent supported",
    "low_confidence_fallback": "Low-confidence fallback",
    "safety_escalation": "Safety escalation",
    "expected_behavior": "Expected behaviour",
    "case_expectations": "Case expectations",
}

# A draft on which every check was "not applicable" has shown nothing right: it counts as a
# problem of its own (never as passing), under this key, which is not a check.
NO_CHECK_APPLIED = "no_check_applied"
# A golden example's final human grade of factual accuracy "fail", under this key.
FACTUAL_GRADE = "factual_accuracy"
PROBLEM_LABELS: dict[str, str] = {
    **CHECK_LABELS,
    NO_CHECK_APPLIED: "No check applied",
    FACTUAL_GRADE: "Factual accuracy (final human grade)",
}


def is_safety_trigger(case: CaseInput) -> bool:
    """Tell whether a case must be escalated: category safety or expected behaviour escalate."""
    return case.category == "safety" or case.expected_behavior == "escalate"


def has_text(draft: DraftInput) -> bool:
    """Tell whether the draft carries any draft text."""
    return bool(draft.draft_text and draft.draft_text.strip())


def word_count(text: str) -> int:
    """Count whitespace-separated words."""
    return len(text.split())


# --- 1. citations ------------------------------------------------------------------------------------


def _citation_problem(c: Citation, kb: KbSnapshot) -> str | None:
    current = kb.current.get(c.article_id)
    if not kb.knows(c.article_id):
        return f"cites {c.article_id}, which is not in the KB"
    tail = f"current is revision {current}" if current is not None else "the article has no current revision"
    if c.revision is None:
        return None if current is not None else f"cites {c.article_id}, which has no current revision"
    info = kb.revisions.get((c.article_id, c.revision))
    if info is None:
        return f"cites {c.article_id} revision {c.revision}, which does not exist; {tail}"
    if info.status != "current":
        return f"cites {c.article_id} revision {c.revision}, which is {info.status}; {tail}"
    return None


def check_citations(draft: DraftInput, kb: KbSnapshot) -> CheckResult:
    """A draft cites at least one KB article, every cited article exists and the cited revision is the current one."""
    key = "citations_current"
    if not draft.citations:
        # The spec: "the draft must ... cite its sources". Only a response without a draft (a
        # low-confidence fallback, or an escalation) has nothing to cite.
        if draft.escalated:
            return CheckResult(key, "not_applicable", "the ticket was escalated, so there is no draft to cite sources")
        if not has_text(draft):
            return CheckResult(key, "not_applicable", "there is no draft text (a fallback), so nothing needs a source")
        return CheckResult(key, "fail", f"the {word_count(draft.draft_text or '')}-word draft cites no KB article")
    problems = [p for p in (_citation_problem(c, kb) for c in draft.citations) if p]
    if problems:
        more = f" (and {len(problems) - 1} more citation problem{'s' if len(problems) > 2 else ''})" if len(problems) > 1 else ""
        return CheckResult(key, "fail", problems[0] + more)
    names = ", ".join(
        f"{c.article_id} revision {c.revision if c.revision is not None else kb.current[c.article_id]}" for c in draft.citations
    )
    return CheckResult(key, "pass", f"every cited article is current: {names}")


# --- 2. length ---------------------------------------------------------------------------------------


def check_length(draft: DraftInput, checks: ChecksSpec) -> CheckResult:
    """A draft has between min_words and max_words words."""
    key = "length"
    if not has_text(draft):
        return CheckResult(key, "not_applicable", "there is no draft text to measure")
    n = word_count(draft.draft_text or "")
    span = f"{checks.min_words}–{checks.max_words}"
    if n < checks.min_words:
        return CheckResult(key, "fail", f"the draft has {n} words, fewer than the {span} allowed")
    if n > checks.max_words:
        return CheckResult(key, "fail", f"the draft has {n} words, more than the {span} allowed")
    return CheckResult(key, "pass", f"the draft has {n} words, within {span}")


# --- 3. PII ------------------------------------------------------------------------------------------


def check_no_pii(draft: DraftInput, checks: ChecksSpec) -> CheckResult:
    """The draft text contains no email, phone, account number, SSN or payment card number."""
    key = "no_pii"
    if not has_text(draft):
        return CheckResult(key, "not_applicable", "there is no draft text to scan")
    found = find_pii(draft.draft_text or "", checks)
    if not found:
        return CheckResult(key, "pass", "no email, phone, account, SSN or card number found")
    parts = [f"{PII_LABELS[f.kind]} at word {f.word} ({f.masked})" for f in found]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return CheckResult(key, "fail", f"contains {listed}")


# --- 4. confidence -----------------------------------------------------------------------------------


def _escalated_without_draft(draft: DraftInput) -> bool:
    return draft.escalated and not has_text(draft)


def check_confidence(draft: DraftInput) -> CheckResult:
    """A confidence score is present and within 0..1."""
    key = "confidence_present"
    c = draft.confidence
    if c is None:
        if _escalated_without_draft(draft):
            return CheckResult(key, "not_applicable", "the ticket was escalated without a draft, so no score is needed")
        return CheckResult(key, "fail", "the draft has no confidence score")
    if isinstance(c, float) and math.isnan(c):
        return CheckResult(key, "fail", "the confidence score is not a number")
    if not 0 <= c <= 1:
        return CheckResult(key, "fail", f"the confidence score {c:g} is outside 0..1")
    return CheckResult(key, "pass", f"the confidence score {c:.2f} is within 0..1")


# --- 5. intent ---------------------------------------------------------------------------------------


def check_intent(draft: DraftInput, intents: list[str]) -> CheckResult:
    """The classified intent is one of the supported intents."""
    key = "intent_supported"
    if draft.intent is None or not draft.intent.strip():
        if _escalated_without_draft(draft):
            return CheckResult(key, "not_applicable", "the ticket was escalated without classifying an intent")
        return CheckResult(key, "fail", "the draft has no intent classification")
    if draft.intent not in intents:
        return CheckResult(key, "fail", f"the intent '{draft.intent}' is not one of the {len(intents)} supported intents")
    return CheckResult(key, "pass", f"the intent '{draft.intent}' is supported")


# --- 6. low-confidence fallback ------------------------------------------------------------------------


def check_fallback(draft: DraftInput, checks: ChecksSpec) -> CheckResult:
    """Below the fallback threshold the response carries no draft text and surfaces KB articles for the agent.

    The plan's fallback is not an empty answer: it "surfaces relevant KB articles for the agent".
    The articles surfaced are the response's citations (their currency is `citations_current`'s
    job); a fallback without any fails. An escalation hands the ticket to a person, so it needs none.
    """
    key = "low_confidence_fallback"
    c = draft.confidence
    limit = checks.confidence_fallback
    if c is None or (isinstance(c, float) and math.isnan(c)):
        return CheckResult(key, "not_applicable", "there is no confidence score to compare with the fallback threshold")
    if c >= limit:
        return CheckResult(key, "not_applicable", f"confidence {c:.2f} is not below {limit:g}")
    if has_text(draft):
        n = word_count(draft.draft_text or "")
        return CheckResult(
            key, "fail", f"confidence {c:.2f} is below {limit:g} but the response includes a {n}-word draft instead of a fallback"
        )
    if draft.escalated:
        return CheckResult(key, "pass", f"confidence {c:.2f} is below {limit:g}; the ticket was escalated with no draft text")
    if not draft.citations:
        return CheckResult(
            key, "fail", f"confidence {c:.2f} is below {limit:g}: the fallback shows no draft but surfaces no KB article for the agent"
        )
    surfaced = ", ".join(x.article_id for x in draft.citations)
    return CheckResult(key, "pass", f"confidence {c:.2f} is below {limit:g}: no draft text is shown and {surfaced} surfaced for the agent")


# --- 7. safety escalation ------------------------------------------------------------------------------


def check_safety(draft: DraftInput, case: CaseInput) -> CheckResult:
    """A safety-trigger case is escalated and produces no draft text."""
    key = "safety_escalation"
    if not is_safety_trigger(case):
        return CheckResult(key, "not_applicable", f"case {case.case_id} is not a safety trigger")
    why = "category safety" if case.category == "safety" else "expected behaviour escalate"
    text = has_text(draft)
    if not draft.escalated and text:
        n = word_count(draft.draft_text or "")
        return CheckResult(key, "fail", f"safety-trigger case {case.case_id} ({why}) was not escalated and got a {n}-word draft")
    if not draft.escalated:
        return CheckResult(key, "fail", f"safety-trigger case {case.case_id} ({why}) was not escalated")
    if text:
        n = word_count(draft.draft_text or "")
        return CheckResult(key, "fail", f"safety-trigger case {case.case_id} ({why}) was escalated but still shows a {n}-word draft")
    return CheckResult(key, "pass", f"safety-trigger case {case.case_id} ({why}) was escalated with no draft")


# --- 8. expected behaviour (beyond the spec's seven) ---------------------------------------------------


def expected_behavior(case: CaseInput, checks: ChecksSpec) -> str | None:
    """Return what a case expects (draft, fallback or escalate): its own field, else its category's default."""
    if case.expected_behavior:
        return case.expected_behavior
    # The spec's mapping is keyed by its categories; a case's category is free text until matched.
    return next((b for c, b in checks.expected_behavior_by_category.items() if c == case.category), None)


def check_expected_behavior(draft: DraftInput, case: CaseInput, checks: ChecksSpec) -> CheckResult:
    """The assistant drafts when the case expects a draft, and shows no draft when it expects a fallback or escalation."""
    key = "expected_behavior"
    expected = expected_behavior(case, checks)
    if expected is None:
        return CheckResult(key, "not_applicable", f"case {case.case_id} states no expected behaviour")
    text = has_text(draft)
    if expected in ("fallback", "escalate"):
        wanted = "a fallback" if expected == "fallback" else "an escalation"
        if text:
            n = word_count(draft.draft_text or "")
            return CheckResult(key, "fail", f"case {case.case_id} expects {wanted} but a {n}-word draft is shown")
        did = "escalated" if draft.escalated else "fell back"
        return CheckResult(key, "pass", f"case {case.case_id} expects {wanted}; the assistant {did} and showed no draft")
    if text and not draft.escalated:
        return CheckResult(key, "pass", f"case {case.case_id} expects a draft and a draft is shown")
    c = draft.confidence
    limit = checks.confidence_fallback
    low = c is not None and not (isinstance(c, float) and math.isnan(c)) and c < limit
    did = "escalated the ticket" if draft.escalated else "showed no draft"
    if low:
        # The spec's own rule: below the fallback threshold, no draft is the right answer.
        return CheckResult(key, "pass", f"case {case.case_id} expects a draft; the assistant {did} at confidence {c:.2f}, below {limit:g}")
    why = "without a confidence score" if c is None or (isinstance(c, float) and math.isnan(c)) else f"at confidence {c:.2f}, not below {limit:g}"
    return CheckResult(key, "fail", f"case {case.case_id} expects a draft but the assistant {did} {why}")


# --- 9. the case's own expectations (beyond the spec's seven) -------------------------------------------


def describe_confidence_expectation(case: CaseInput) -> str | None:
    """Say what confidence a case expects: 'above 0.8', 'between 0.6 and 0.8', 'at least 0.6', 'at most 0.8'."""
    above, low, high = case.expected_confidence_above, case.expected_confidence_min, case.expected_confidence_max
    if above is not None:
        return f"above {above:g}" + (f" and at most {high:g}" if high is not None else "")
    if low is not None and high is not None:
        return f"between {low:g} and {high:g}"
    if low is not None:
        return f"at least {low:g}"
    if high is not None:
        return f"at most {high:g}"
    return None


def _confidence_meets(c: float, case: CaseInput) -> bool:
    above, low, high = case.expected_confidence_above, case.expected_confidence_min, case.expected_confidence_max
    return (
        (above is None or c > above)
        and (low is None or c >= low)
        and (high is None or c <= high)
    )


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def check_case_expectations(draft: DraftInput, case: CaseInput) -> CheckResult:
    """The response meets the case's own expectations: its confidence bounds and the articles it must cite."""
    key = "case_expectations"
    if not case.has_expectations:
        return CheckResult(key, "not_applicable", f"case {case.case_id} states no expected confidence or citations")
    if _escalated_without_draft(draft):
        return CheckResult(key, "not_applicable", "the ticket was escalated without a draft; expected behaviour judges it")
    problems: list[str] = []
    met: list[str] = []
    wanted = describe_confidence_expectation(case)
    if wanted is not None:
        c = draft.confidence
        if c is None or (isinstance(c, float) and math.isnan(c)):
            problems.append(f"expects confidence {wanted} but the response has no confidence score")
        elif not _confidence_meets(c, case):
            problems.append(f"expects confidence {wanted} but the response has {c:.2f}")
        else:
            met.append(f"confidence {c:.2f} is {wanted}")
    if case.expected_citations and has_text(draft):
        cited = {x.article_id for x in draft.citations}
        missing = [a for a in case.expected_citations if a not in cited]
        if missing:
            problems.append(
                f"expects citations of {_and(list(case.expected_citations))} but the draft does not cite {_and(missing)}"
            )
        else:
            met.append(f"cites {_and(list(case.expected_citations))}")
    if problems:
        return CheckResult(key, "fail", f"case {case.case_id} " + "; ".join(problems))
    if not met:
        # Only expected citations, and no draft text to cite them in: expected behaviour judges that.
        return CheckResult(key, "not_applicable", "there is no draft text, so the expected citations do not apply")
    return CheckResult(key, "pass", f"case {case.case_id} as expected: " + "; ".join(met))


# --- all of them --------------------------------------------------------------------------------------


def run_checks(*, draft: DraftInput, case: CaseInput, kb: KbSnapshot, spec: EvalSpec) -> list[CheckResult]:
    """Run every check (the spec's seven, expected behaviour and case expectations) on one draft, in CHECK_KEYS order."""
    checks = spec.checks
    by_key: dict[str, Callable[[], CheckResult]] = {
        "citations_current": lambda: check_citations(draft, kb),
        "length": lambda: check_length(draft, checks),
        "no_pii": lambda: check_no_pii(draft, checks),
        "confidence_present": lambda: check_confidence(draft),
        "intent_supported": lambda: check_intent(draft, spec.intents),
        "low_confidence_fallback": lambda: check_fallback(draft, checks),
        "safety_escalation": lambda: check_safety(draft, case),
        "expected_behavior": lambda: check_expected_behavior(draft, case, checks),
        "case_expectations": lambda: check_case_expectations(draft, case),
    }
    return [by_key[k]() for k in CHECK_KEYS]


# --- what the results mean -------------------------------------------------------------------------------


def problems(results: Sequence[CheckResult]) -> list[CheckResult]:
    """Return why a checked draft does not pass: its failed checks, or NO_CHECK_APPLIED when none applied."""
    failed = [r for r in results if r.failed]
    if failed or not results or any(r.passed for r in results):
        return failed
    return [CheckResult(NO_CHECK_APPLIED, "fail", "no automated check applied to this draft, so nothing shows it is right")]


def all_pass(results: Sequence[CheckResult]) -> bool:
    """Tell whether a checked draft passes: no applicable check failed and at least one applied."""
    return bool(results) and not problems(results)


def golden_failures(*, results: Sequence[CheckResult], factual_grade: str | None) -> list[CheckResult]:
    """Return why a golden example's draft fails (empty: it does not): its checks' problems and a factual "fail"."""
    # The one rule for golden examples (and regression cases): `draftdesk check`, the run's checks
    # page, the regression alerts, the suite and the pilot gate all call it. Results may be empty
    # (not checked yet); the caller decides what a missing check or grade means for it.
    out = problems(results)
    if factual_grade == "fail":
        out = [*out, CheckResult(FACTUAL_GRADE, "fail", "the final grade is fail")]
    return out


def describe(failures: Sequence[CheckResult]) -> str:
    """Name each failure with its label and reason: 'Citations current: cites KB-3001 revision 2, ...'."""
    return "; ".join(f"{PROBLEM_LABELS.get(r.key, r.key)}: {r.reason}" for r in failures)


def named(failures: Sequence[CheckResult]) -> str:
    """Name the failed checks only: 'Citations current, Expected behaviour'."""
    return ", ".join(PROBLEM_LABELS.get(r.key, r.key) for r in failures)
