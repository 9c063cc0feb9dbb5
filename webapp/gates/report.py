"""A launch-gate report: criteria with measured value, threshold, verdict and evidence."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Literal

from webapp.core.figures import FigureState

Verdict = Literal["pass", "fail", "incomplete"]


@dataclass(frozen=True)
class Evidence:
    """One thing that explains a verdict: a failing draft, an ungraded draft, a day, a report."""

    label: str
    href: str | None = None
    detail: str = ""


@dataclass
class CriterionResult:
    key: str
    title: str
    status: Verdict
    measured: str
    threshold: str
    summary: str
    value: float | None = None
    evidence: list[Evidence] = field(default_factory=list)
    parts: list[CriterionResult] = field(default_factory=list)
    action: str = ""  # what to do next, when the criterion says (e.g. export the regression suite) ...
    command: str = ""  # ... and the command that does it
    link: str = ""  # ... or the page where it is done (e.g. the PPI page's further-sample button)


@dataclass
class GateReport:
    gate: Literal["pilot", "production"]
    run_id: int | None
    run_name: str | None
    criteria: list[CriterionResult]
    generated_at: dt.datetime
    # The stored PPI figures it read (webapp/ppi/stored_figures.py): current, or updating / computing
    # (grades or draws changed since they were computed): a decision is signed on current figures only.
    figures_state: FigureState = "current"
    # Its own whole-run criteria as stored (webapp/gates/stored_report.py): current, or updating (checks, grades,
    # the suite or the eval set changed since they were computed). figures_state includes it.
    report_state: FigureState = "current"

    @property
    def current(self) -> bool:
        """Tell whether every stored figure it read was computed from the inputs as they are."""
        return self.figures_state == "current" and self.report_state == "current"

    @property
    def status(self) -> Verdict:
        return combine([c.status for c in self.criteria])

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def missing(self) -> list[str]:
        """One line per criterion that does not pass, failing ones first (they are why the gate fails;
        incomplete ones only wait for work), saying what is wrong or missing."""
        open_ = sorted((c for c in self.criteria if c.status != "pass"), key=lambda c: c.status != "fail")
        return [f"{c.title}: {c.summary}" for c in open_]


def combine(statuses: list[Verdict]) -> Verdict:
    """Fail if any fails; pass only if all pass; otherwise incomplete."""
    if any(s == "fail" for s in statuses):
        return "fail"
    if statuses and all(s == "pass" for s in statuses):
        return "pass"
    return "incomplete"


def to_markdown(report: GateReport, base_url: str = "") -> str:
    """Render the report as Markdown for a write-up."""
    icon = {"pass": "PASS", "fail": "FAIL", "incomplete": "INCOMPLETE"}
    lines = [
        f"# {report.gate.capitalize()} launch gate: {icon[report.status]}",
        "",
        f"Run: {report.run_name or '—'} · generated {report.generated_at:%Y-%m-%d %H:%M} UTC",
        "",
    ]
    if report.missing:
        lines += ["What is missing:", ""] + [f"- {m}" for m in report.missing] + [""]
    lines += ["| Criterion | Measured | Threshold | Verdict |", "|---|---|---|---|"]
    for c in report.criteria:
        lines.append(f"| {c.title} | {c.measured} | {c.threshold} | {icon[c.status]} |")
    for c in report.criteria:
        if c.evidence or c.parts or c.action:
            lines += ["", f"## {c.title}", "", c.summary, ""]
            if c.action:
                lines += [c.action + (f" `{c.command}`" if c.command else "") + (f" ({c.link})" if c.link else ""), ""]
            for p in c.parts:
                lines.append(f"- {p.title}: {p.measured} ({icon[p.status]})")
            for e in c.evidence:
                link = f"[{e.label}]({base_url}{e.href})" if e.href else e.label
                lines.append(f"- {link}{' — ' + e.detail if e.detail else ''}")
    return "\n".join(lines) + "\n"


def plural(count: int, noun: str) -> str:
    """Return '1 draft' / '3 drafts'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
