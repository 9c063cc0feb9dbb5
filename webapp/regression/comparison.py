"""Two runs over the same dataset, case by case: outcomes, per-check and rubric deltas, and noise.

A case passes in a run when every checked draft (sample) of it passes all applicable checks
(`checks.service.case_passes`). Between runs A (before) and B (after) a case is `fixed` (fail →
pass), `broke` (pass → fail), `unchanged_pass`, `unchanged_fail`, `only_a` / `only_b` (drafted in one
run only) or `not_checked` (a side has drafts without check results).

The headline and every per-check row compare the same cases: those both runs have drafts of, checked
in both (the paired cases). Cases only in one run, or not checked in one, are counted apart ("3 cases
only in A, 0 only in B"): a run that drafted fewer cases must not look better or worse for it. So the
headline's change is (fixed - broke) / paired cases, and a check's change is (cases it stopped failing
- cases it started failing) / paired cases: when no case changed, no figure moves.

Whether a change is more than noise is judged on the paired outcomes with the exact McNemar test:
of the cases that changed, how likely is a split at least this uneven between fixed and broke if
either direction were equally likely (a two-sided binomial test with p = 0.5, scipy's `binomtest`).
With 2 changed cases out of 100 the answer is "within noise" however they split.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from scipy.stats import binomtest
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from webapp.checks import service as checks_service
from webapp.checks.service import RunSummary
from webapp.core.csv_export import csv_text
from webapp.core.spec import EvalSpec
from webapp.datasets.models import Dataset, EvalCase
from webapp.grading.status import FinalGradeView, final_grades
from webapp.regression.service import NotComparable
from webapp.runs.models import Draft, Run

# A paired change with an exact p-value below this is reported as unlikely to be noise.
SIGNIFICANCE_LEVEL = 0.05

OUTCOMES: tuple[str, ...] = ("fixed", "broke", "unchanged_pass", "unchanged_fail", "only_a", "only_b", "not_checked")
OUTCOME_LABELS: dict[str, str] = {
    "fixed": "fixed",
    "broke": "broke",
    "unchanged_pass": "unchanged pass",
    "unchanged_fail": "unchanged fail",
    "only_a": "only in A",
    "only_b": "only in B",
    "not_checked": "not checked",
}


def mcnemar_exact(fixed: int, broke: int) -> float | None:
    """Return the two-sided exact McNemar p-value for paired changes, or None when nothing changed."""
    n = fixed + broke
    if n == 0:
        return None
    return float(min(1.0, binomtest(min(fixed, broke), n, 0.5).pvalue))


@dataclass
class PairedTest:
    """Paired pass/fail outcomes of the cases both runs have: how many changed each way, and the p-value."""

    pairs: int
    fixed: int
    broke: int

    @property
    def changed(self) -> int:
        return self.fixed + self.broke

    @property
    def p_value(self) -> float | None:
        return mcnemar_exact(self.fixed, self.broke)

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < SIGNIFICANCE_LEVEL

    @property
    def counted(self) -> str:
        """Say the changes and the p-value without a verdict: '10 of 100 cases changed (2 fixed, 8 broke): exact McNemar p = 0.109'."""
        return f"{self.changed} of {self.pairs} cases changed ({self.fixed} fixed, {self.broke} broke): exact McNemar p = {self.p_value or 1:.3f}"

    @property
    def note(self) -> str:
        if self.pairs == 0:
            return "no case has an outcome in both runs"
        if self.changed == 0:
            return f"0 of {self.pairs} cases changed"
        verdict = "unlikely to be noise" if self.significant else "within noise"
        return (
            f"{self.changed} of {self.pairs} cases changed ({self.fixed} fixed, {self.broke} broke): "
            f"exact McNemar p = {self.p_value:.3f}, {verdict}"
        )


def paired_test(a: dict[str, bool | None], b: dict[str, bool | None]) -> PairedTest:
    """Pair per-case outcomes (None = no outcome) of two runs and count the changes each way."""
    pairs = fixed = broke = 0
    for case_id, before in a.items():
        after = b.get(case_id)
        if before is None or after is None:
            continue
        pairs += 1
        fixed += int(not before and after)
        broke += int(before and not after)
    return PairedTest(pairs, fixed, broke)


@dataclass
class CaseSide:
    """One case in one run: its drafts, whether it passes all checks, and the checks that failed."""

    draft_ids: list[int]
    passed: bool | None  # None: not checked
    failed_checks: list[str] = field(default_factory=list)


@dataclass
class CaseRow:
    """One case across the two runs."""

    case_id: str
    category: str | None
    intent: str | None
    golden: bool
    a: CaseSide | None
    b: CaseSide | None
    change: str


@dataclass
class CheckDelta:
    """One check (or all checks together) over the paired cases: cases not failing it in A and in B, and the paired test.

    For all checks together a case passes when every draft of it passes; for one check a case passes
    when no draft of it fails that check (not applicable counts as not failing, as "cases changed" reads it).
    """

    key: str
    label: str
    a_passed: int
    a_total: int
    b_passed: int
    b_total: int
    test: PairedTest
    fixed_cases: list[str] = field(default_factory=list)
    broke_cases: list[str] = field(default_factory=list)

    @property
    def a(self) -> float | None:
        return self.a_passed / self.a_total if self.a_total else None

    @property
    def b(self) -> float | None:
        return self.b_passed / self.b_total if self.b_total else None

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a


@dataclass
class RubricDelta:
    """A rubric criterion's mean final grade in both runs (factual accuracy: share of pass), with counts."""

    key: str
    name: str
    kind: str
    a: float | None
    b: float | None
    a_graded: int
    b_graded: int
    test: PairedTest | None  # pass/fail criteria only

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a


@dataclass
class Comparison:
    """Two runs over the same dataset side by side."""

    a: RunSummary
    b: RunSummary
    cases: list[CaseRow]
    checks: list[CheckDelta]
    overall: CheckDelta
    rubric: list[RubricDelta] | None  # None: no final grades yet for either run

    def count(self, change: str) -> int:
        """Count the cases with this outcome (`unchanged` counts both unchanged outcomes)."""
        if change == "unchanged":
            return self.count("unchanged_pass") + self.count("unchanged_fail")
        return sum(c.change == change for c in self.cases)

    def filtered(
        self, *, category: str = "", intent: str = "", golden: str = "", outcome: str = ""
    ) -> list[CaseRow]:
        """Return the cases matching the filters (golden: yes/no; empty filters match everything)."""
        rows = self.cases
        if category:
            rows = [c for c in rows if c.category == category]
        if intent:
            rows = [c for c in rows if c.intent == intent]
        if golden in ("yes", "no"):
            rows = [c for c in rows if c.golden == (golden == "yes")]
        if outcome:
            rows = [c for c in rows if c.change == outcome]
        return rows

    @property
    def facets(self) -> dict[str, list[str]]:
        return {
            "categories": sorted({c.category for c in self.cases if c.category}),
            "intents": sorted({c.intent for c in self.cases if c.intent}),
        }

    @property
    def paired(self) -> int:
        """Return how many cases both runs have, checked in both (what every rate compares)."""
        return self.overall.test.pairs

    @property
    def apart(self) -> str:
        """Say which cases the figures leave out: '3 cases only in A, 0 only in B' (and any not checked in one run)."""
        text = f"{_cases(self.count('only_a'))} only in A, {self.count('only_b')} only in B"
        unchecked = self.count("not_checked")
        return text + (f", {_cases(unchecked)} not checked in one of them" if unchecked else "")

    @property
    def headline_tone(self) -> str:
        """Return the change's colour: up or down only when the paired test says it is unlikely to be noise."""
        delta = self.overall.delta
        if not self.overall.test.significant or delta is None or delta == 0:
            return ""
        return "up" if delta > 0 else "down"

    def to_csv(self, cases: list[CaseRow] | None = None) -> str:
        """Return the per-case table as CSV (one row per case)."""
        header = [
            "case_id", "category", "intent", "golden", "change",
            "a_passed", "a_failed_checks", "a_draft_ids", "b_passed", "b_failed_checks", "b_draft_ids",
        ]

        def side(s: CaseSide | None) -> list[str]:
            if s is None:
                return ["", "", ""]
            passed = "" if s.passed is None else ("pass" if s.passed else "fail")
            return [passed, " ".join(s.failed_checks), " ".join(str(d) for d in s.draft_ids)]

        # Case ids, categories and intents come from imported datasets: the shared writer neutralises formulas.
        rows = (
            [c.case_id, c.category or "", c.intent or "", "yes" if c.golden else "no", c.change, *side(c.a), *side(c.b)]
            for c in (self.cases if cases is None else cases)
        )
        return csv_text(header, rows)


def _cases(n: int) -> str:
    return f"{n} case{'' if n == 1 else 's'}"


def _same_dataset(session: Session, a: Run, b: Run) -> bool:
    if a.dataset_id == b.dataset_id:
        return True
    da, db = session.get(Dataset, a.dataset_id), session.get(Dataset, b.dataset_id)
    return bool(da and db and da.sha256 == db.sha256)


def comparable_runs(session: Session, a_id: int, b_id: int) -> tuple[Run, Run]:
    ra, rb = session.get(Run, a_id), session.get(Run, b_id)
    if ra is None or rb is None:
        raise LookupError(f"run: no run with id {a_id if ra is None else b_id}")
    if not _same_dataset(session, ra, rb):
        da, db = session.get(Dataset, ra.dataset_id), session.get(Dataset, rb.dataset_id)
        raise NotComparable(
            f"runs {ra.name} and {rb.name} are over different datasets "
            f"({da.name if da else '?'} v{da.version if da else '?'} and {db.name if db else '?'} v{db.version if db else '?'}); "
            "only runs over the same dataset can be compared"
        )
    return ra, rb


@dataclass
class _CaseInfo:
    category: str | None
    intent: str | None
    golden: bool
    position: int


def drafted_cases(session: Session, run_ids: tuple[int, int]) -> tuple[dict[str, _CaseInfo], dict[int, dict[str, list[int]]]]:
    """Return the cases drafted in either run (by case id) and, per run, each case's draft ids."""
    # SQLAlchemy's select: SQLModel's is typed for at most four columns.
    rows = session.execute(
        sa_select(
            col(Draft.id), col(Draft.run_id), col(EvalCase.case_id), col(EvalCase.category), col(EvalCase.intent), col(EvalCase.golden), col(EvalCase.position)
        )
        .join(EvalCase, col(EvalCase.id) == col(Draft.case_pk))
        .where(col(Draft.run_id).in_(run_ids))
        .order_by(col(EvalCase.position), col(Draft.sample_index), col(Draft.id))
    ).all()
    info: dict[str, _CaseInfo] = {}
    drafts: dict[int, dict[str, list[int]]] = {rid: defaultdict(list) for rid in run_ids}
    for draft_id, run_id, case_id, category, intent, golden, position in rows:
        info.setdefault(case_id, _CaseInfo(category, intent, bool(golden), position))
        drafts[run_id][case_id].append(draft_id)
    return info, drafts


def _paired_rows(cases: list[CaseRow]) -> list[tuple[CaseRow, CaseSide, CaseSide]]:
    """Return the cases checked in both runs, with their two sides."""
    return [(c, c.a, c.b) for c in cases if c.a and c.b and c.a.passed is not None and c.b.passed is not None]


def _check_change(cases: list[CaseRow], key: str) -> tuple[PairedTest, list[str], list[str]]:
    """Return a check's paired test and the ids of the cases it fixed and broke, read from the case rows.

    One source of truth with the per-case table: a case fails a check in a run when the check is
    among that side's failed checks (some draft fails it); otherwise (passed or not applicable) it
    does not fail it. So a case whose draft was not applicable to the low-confidence check in A and
    fails it in B broke that check, as the table shows it, instead of being left out of the pairs.
    """
    fixed: list[str] = []
    broke: list[str] = []
    paired = _paired_rows(cases)
    for c, a, b in paired:
        before, after = key in a.failed_checks, key in b.failed_checks
        if before and not after:
            fixed.append(c.case_id)
        elif after and not before:
            broke.append(c.case_id)
    return PairedTest(len(paired), len(fixed), len(broke)), fixed, broke


def _change(a: CaseSide | None, b: CaseSide | None) -> str:
    if a is None:
        return "only_b"
    if b is None:
        return "only_a"
    if a.passed is None or b.passed is None:
        return "not_checked"
    if a.passed == b.passed:
        return "unchanged_pass" if a.passed else "unchanged_fail"
    return "fixed" if b.passed else "broke"


def _grade_values(grades: dict[int, FinalGradeView], key: str, pass_fail: bool) -> list[float]:
    """Return a criterion's final grades as numbers (pass/fail as 1/0)."""
    vals = [getattr(v, key, None) for v in grades.values()]
    return [float(v == "pass") if pass_fail else float(v) for v in vals if v is not None]


def _case_factual(grades: dict[int, FinalGradeView], key: str, drafts: dict[str, list[int]]) -> dict[str, bool | None]:
    """Return per case whether every graded draft passes a pass/fail criterion (None: none graded)."""
    result: dict[str, bool | None] = {}
    for case_id, ids in drafts.items():
        seen = [getattr(grades[d], key, None) for d in ids if d in grades]
        seen = [v for v in seen if v is not None]
        result[case_id] = None if not seen else all(v == "pass" for v in seen)
    return result


def _rubric(session: Session, spec: EvalSpec, a_id: int, b_id: int, drafts: dict[int, dict[str, list[int]]]) -> list[RubricDelta] | None:
    ga = final_grades(session=session, run_id=a_id)
    gb = final_grades(session=session, run_id=b_id)
    if not ga and not gb:
        return None
    out: list[RubricDelta] = []
    for crit in spec.rubric.criteria:
        pass_fail = crit.kind == "pass_fail"
        va, vb = _grade_values(ga, crit.key, pass_fail), _grade_values(gb, crit.key, pass_fail)
        test = None
        if pass_fail:
            test = paired_test(_case_factual(ga, crit.key, drafts[a_id]), _case_factual(gb, crit.key, drafts[b_id]))
        out.append(
            RubricDelta(
                key=crit.key,
                name=crit.name,
                kind=crit.kind,
                a=sum(va) / len(va) if va else None,
                b=sum(vb) / len(vb) if vb else None,
                a_graded=len(va),
                b_graded=len(vb),
                test=test,
            )
        )
    return out


def compare_runs(*, session: Session, spec: EvalSpec, a_id: int, b_id: int) -> Comparison:
    """Compare two runs over the same dataset; raise NotComparable for runs over different datasets."""
    comparable_runs(session, a_id, b_id)
    sa = checks_service.run_summary(session=session, run_id=a_id)
    sb = checks_service.run_summary(session=session, run_id=b_id)
    info, drafts = drafted_cases(session, (a_id, b_id))
    pa, pb = checks_service.case_passes(summary=sa), checks_service.case_passes(summary=sb)
    fa: dict[str, list[str]] = defaultdict(list)
    fb: dict[str, list[str]] = defaultdict(list)
    for summary, failed in ((sa, fa), (sb, fb)):
        for o in summary.outcomes:
            failed[o.case_id].extend(r.key for r in o.failures if r.key not in failed[o.case_id])

    def side(run_id: int, passes: dict[str, bool], failed: dict[str, list[str]], case_id: str) -> CaseSide | None:
        ids = drafts[run_id].get(case_id)
        return None if not ids else CaseSide(list(ids), passes.get(case_id), list(failed.get(case_id, [])))

    cases: list[CaseRow] = []
    for case_id, ci in sorted(info.items(), key=lambda kv: kv[1].position):
        a, b = side(a_id, pa, fa, case_id), side(b_id, pb, fb, case_id)
        cases.append(CaseRow(case_id, ci.category, ci.intent, ci.golden, a, b, _change(a, b)))

    paired = _paired_rows(cases)
    n = len(paired)
    checks: list[CheckDelta] = []
    for c in sb.per_check:
        test, fixed, broke = _check_change(cases, c.key)
        a_failing = sum(c.key in a.failed_checks for _, a, _ in paired)
        b_failing = sum(c.key in b.failed_checks for _, _, b in paired)
        checks.append(CheckDelta(c.key, c.label, n - a_failing, n, n - b_failing, n, test, fixed, broke))
    overall = CheckDelta(
        "overall", "All checks", sum(bool(a.passed) for _, a, _ in paired), n, sum(bool(b.passed) for _, _, b in paired), n,
        PairedTest(n, sum(c.change == "fixed" for c in cases), sum(c.change == "broke" for c in cases)),
        [c.case_id for c in cases if c.change == "fixed"],
        [c.case_id for c in cases if c.change == "broke"],
    )
    return Comparison(
        a=sa, b=sb, cases=cases, checks=checks, overall=overall, rubric=_rubric(session, spec, a_id, b_id, drafts)
    )
