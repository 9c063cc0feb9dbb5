"""Each metric's label, daily target and alert threshold, read from the spec's `online_metrics` section.

Comparisons are made on rounded values (see `_DECIMALS`); the alert rules' baseline-relative
thresholds are resolved here, so that charts, alerts and gates draw the same lines.
"""

from __future__ import annotations

from webapp.core import units
from webapp.core.spec import AlertRule, EvalSpec, TargetRule

# Comparisons are made on values rounded to this many decimals, so that 0.10 - 0.08 counts as 0.02.
_DECIMALS = 12

METRIC_LABELS: dict[str, str] = {
    "accept_rate": "Accept rate",
    "reject_rate": "Reject rate",
    "edit_distance": "Edit distance (mean)",
    "escalation_rate": "Escalation rate",
    "handle_time_s": "Handle time (s)",
    "latency_p95_s": "Latency p95 (s)",
    "hallucination_reports": "Confirmed hallucinations",
    "cost_per_draft": "Cost per draft ($)",
}


def target_rule(metric: str, spec: EvalSpec) -> TargetRule | None:
    """Return a metric's daily target rule, if the spec has one."""
    return next((rule for name, rule in spec.online_metrics.targets.items() if name == metric), None)


def alert_rule(metric: str, spec: EvalSpec) -> AlertRule | None:
    """Return a metric's alert rule, if the spec has one."""
    return next((rule for name, rule in spec.online_metrics.alerts.items() if name == metric), None)


def check_target(rule: TargetRule, value: float | None, spec: EvalSpec) -> bool | None:
    """Tell whether a value meets a target rule; None without a value."""
    if value is None:
        return None
    v = round(value, _DECIMALS)
    t = rule.value
    if rule.op == "within_baseline":
        return round(abs(value - spec.online_metrics.escalation_baseline), _DECIMALS) <= t
    return _compare(v, rule.op, t)


def alert_breached(rule: AlertRule, value: float, spec: EvalSpec) -> bool:
    """Tell whether a (window) value crosses an alert threshold."""
    return _compare(round(value, _DECIMALS), *alert_threshold(rule, spec))


def alert_threshold(rule: AlertRule, spec: EvalSpec) -> tuple[str, float]:
    """Return an alert rule's comparison and threshold, a baseline-relative rule resolved to '>' a number."""
    if rule.op == "above_baseline":
        return ">", round(spec.online_metrics.escalation_baseline + rule.value, _DECIMALS)
    return rule.op, rule.value


def alert_threshold_value(metric: str, spec: EvalSpec) -> float | None:
    """Return the threshold line of a metric's alert (baseline-relative rules resolved)."""
    rule = alert_rule(metric, spec)
    return None if rule is None else alert_threshold(rule, spec)[1]


def target_lines(metric: str, spec: EvalSpec) -> list[float]:
    """Return the target line(s) of a metric (two for a band around the baseline)."""
    rule = target_rule(metric, spec)
    if rule is None:
        return []
    if rule.op == "within_baseline":
        b = spec.online_metrics.escalation_baseline
        return [round(b - rule.value, _DECIMALS), round(b + rule.value, _DECIMALS)]
    return [rule.value]


def _compare(v: float, op: str, t: float) -> bool:
    return {
        ">": v > t,
        "<": v < t,
        ">=": v >= t,
        "<=": v <= t,
        "==": v == t,
    }[op]


def describe_target(metric: str, spec: EvalSpec) -> str:
    """Return a metric's daily target in its unit, e.g. '> 75.0%' or '8.0% ± 2.0 pts'."""
    rule = target_rule(metric, spec)
    if rule is None:
        return "no target"
    if rule.op == "within_baseline":
        base = spec.online_metrics.escalation_baseline
        return f"{units.text(metric, base)} ± {units.delta(rule.value, units.unit(metric)).text.lstrip('+')}"
    return units.threshold(metric, rule.op, rule.value)
