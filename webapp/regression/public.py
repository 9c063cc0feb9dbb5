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
    return SuiteResultPublic(case_id=r.case.case_id, status=r.status, reason=r.reason, draft_ids=r.draft_ids, source=r.case.source)


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
    return PairedTestPublic(pairs=t.pairs, fixed=t.fixed, broke=t.broke, p_value=t.p_value, significant=t.significant, note=t.note)


def side_public(s: comparison.CaseSide | None) -> SidePublic | None:
    """Return one case in one run as JSON (null: the run has no draft of it)."""
    return None if s is None else SidePublic(draft_ids=s.draft_ids, passed=s.passed, failed_checks=s.failed_checks)


def case_row_public(c: comparison.CaseRow) -> CaseRowPublic:
    """Return one case across the two runs as JSON."""
    return CaseRowPublic(
        case_id=c.case_id, category=c.category, intent=c.intent, golden=c.golden, change=c.change, a=side_public(c.a), b=side_public(c.b)
    )


def check_delta_public(d: comparison.CheckDelta) -> CheckDeltaPublic:
    """Return one check (or all checks) in both runs as JSON."""
    return CheckDeltaPublic(
        key=d.key,
        label=d.label,
        a=PassCount(passed=d.a_passed, total=d.a_total, rate=d.a),
        b=PassCount(passed=d.b_passed, total=d.b_total, rate=d.b),
        delta=d.delta,
        paired=paired_public(d.test),
        fixed_cases=d.fixed_cases,
        broke_cases=d.broke_cases,
    )


def rubric_delta_public(r: comparison.RubricDelta) -> RubricDeltaPublic:
    """Return a rubric criterion in both runs as JSON (the paired test for pass/fail criteria only)."""
    return RubricDeltaPublic(
        key=r.key,
        name=r.name,
        a=GradedMean(mean=r.a, graded=r.a_graded),
        b=GradedMean(mean=r.b, graded=r.b_graded),
        delta=r.delta,
        paired=paired_public(r.test) if r.test else None,
    )


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
    return RegressionAlertPublic(
        id=stored_id(alert.id),
        run=run.name,
        kind=alert.kind,
        message=alert.message,
        evidence=alert.evidence,
        created_at=alert.created_at.isoformat(),
        acknowledged_by=alert.acknowledged_by,
        acknowledged_at=alert.acknowledged_at.isoformat() if alert.acknowledged_at else None,
        kind_label=alert_kind_label(alert),
    )


def reading_public(reading: PassRateDifference) -> PassRateReadingPublic:
    """Return a sampled pass-rate reading as JSON."""
    return PassRateReadingPublic(
        run=RunName(id=reading.run_id, name=reading.run_name),
        baseline=RunName(id=reading.baseline_id, name=reading.baseline_name),
        estimate=reading.estimate,
        low=reading.low,
        high=reading.high,
        threshold=reading.threshold,
        verdict=reading.verdict,
        text=reading.text,
        hint=reading.hint,
        cases=reading.cases,
        graded=reading.graded,
        baseline_graded=reading.baseline_graded,
        pending=reading.pending,
        ppi_page=f"/ppi/runs/{reading.run_id}",
        baseline_ppi_page=f"/ppi/runs/{reading.baseline_id}",
    )
