"""The regression API's answers (webapp.regression.schemas) built from the domain's objects: suite results,
run comparisons, alerts and sampled pass-rate readings. Field names and values are the API's contract
(docs/api.md); the routes in webapp.regression.routes return these."""

from __future__ import annotations

from webapp.core.db import stored_id
from webapp.regression import comparison
from webapp.regression.alerts import PassRateDifference, alert_kind_label
from webapp.regression.models import RegressionAlert
from webapp.regression.schemas import (
    CaseRowPublic,
    CheckDeltaPublic,
    ComparisonPublic,
    GradedMean,
    PairedTestPublic,
    PassCount,
    PassRateReadingPublic,
    RegressionAlertPublic,
    RubricDeltaPublic,
    RunName,
    SidePublic,
    SuiteReportPublic,
    SuiteResultPublic,
)
from webapp.regression.service import SuiteReport, SuiteResult
from webapp.runs.models import Run


def suite_result_public(r: SuiteResult) -> SuiteResultPublic:
    """Return one regression case's result in a run as JSON."""
    return SuiteResultPublic.of(r, source=r.case.source)


def suite_report_public(report: SuiteReport) -> SuiteReportPublic:
    """Return the suite's results for a run as JSON (pass_rate null when no case ran)."""
    return SuiteReportPublic(
        run=RunName(id=stored_id(report.run.id), name=report.run.name),
        passed=report.count("pass"),
        failed=report.count("fail"),
        not_run=report.count("not_run"),
        not_checked=report.count("not_checked"),
        pass_rate=report.pass_rate,
        cases=[suite_result_public(r) for r in report.results],
    )


def paired_public(t: comparison.PairedTest) -> PairedTestPublic:
    """Return a paired test (changes each way, exact McNemar p) as JSON."""
    return PairedTestPublic.of(t)


def side_public(s: comparison.CaseSide | None) -> SidePublic | None:
    """Return one case in one run as JSON (null: the run has no draft of it)."""
    return None if s is None else SidePublic.of(s)


def case_row_public(c: comparison.CaseRow) -> CaseRowPublic:
    """Return one case across the two runs as JSON."""
    return CaseRowPublic.of(c)


def check_delta_public(d: comparison.CheckDelta) -> CheckDeltaPublic:
    """Return one check (or all checks) in both runs as JSON."""
    # a and b: the dataclass keeps each side's counts in flat fields
    return CheckDeltaPublic.of(
        d,
        a=PassCount(passed=d.a_passed, total=d.a_total, rate=d.a),
        b=PassCount(passed=d.b_passed, total=d.b_total, rate=d.b),
        paired=d.test,
    )


def rubric_delta_public(r: comparison.RubricDelta) -> RubricDeltaPublic:
    """Return a rubric criterion in both runs as JSON (the paired test for pass/fail criteria only)."""
    # a and b: the dataclass keeps each side's mean and count in flat fields
    return RubricDeltaPublic.of(r, a=GradedMean(mean=r.a, graded=r.a_graded), b=GradedMean(mean=r.b, graded=r.b_graded), paired=r.test)


def comparison_public(cmp: comparison.Comparison, cases: list[comparison.CaseRow] | None = None) -> ComparisonPublic:
    """Return two runs compared as JSON, with `cases` (default: every case) in its per-case table."""
    return ComparisonPublic(
        a=RunName(id=cmp.a.run_id, name=cmp.a.run_name),
        b=RunName(id=cmp.b.run_id, name=cmp.b.run_name),
        overall=check_delta_public(cmp.overall),
        paired_cases=cmp.paired,
        apart=cmp.apart,
        counts={k: cmp.count(k) for k in comparison.OUTCOMES},
        cases=[case_row_public(c) for c in (cmp.cases if cases is None else cases)],
        checks=[check_delta_public(c) for c in cmp.checks],
        rubric=None if cmp.rubric is None else [rubric_delta_public(r) for r in cmp.rubric],
    )


def alert_public(alert: RegressionAlert, run: Run) -> RegressionAlertPublic:
    """Return a regression alert as JSON."""
    return RegressionAlertPublic.of(alert, run=run.name, kind_label=alert_kind_label(alert))


def reading_public(reading: PassRateDifference) -> PassRateReadingPublic:
    """Return a sampled pass-rate reading as JSON."""
    return PassRateReadingPublic.of(
        reading,
        run=RunName(id=reading.run_id, name=reading.run_name),
        baseline=RunName(id=reading.baseline_id, name=reading.baseline_name),
        ppi_page=f"/ppi/runs/{reading.run_id}",
        baseline_ppi_page=f"/ppi/runs/{reading.baseline_id}",
    )
