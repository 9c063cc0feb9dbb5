"""Inter-grader agreement per criterion, grader pair, grader and ISO week."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.core.spec import Criterion, EvalSpec
from webapp.core.timeutil import as_utc
from webapp.grading.models import (
    FinalGrade,
    Grade,
    GradeChange,
)
from webapp.grading.scores import disagreement_reasons, scores_of
from webapp.grading.stats import cohen_kappa, exact_agreement
from webapp.runs.models import Draft


def _labels(criterion: Criterion) -> list[Any]:
    if criterion.kind == "pass_fail":
        return ["fail", "pass"]
    assert criterion.min is not None and criterion.max is not None
    return list(range(criterion.min, criterion.max + 1))


def _criterion_stats(
    criterion: Criterion, pairs: list[tuple[dict[str, Any], dict[str, Any]]]
) -> dict[str, Any]:
    a = [p[0][criterion.key] for p in pairs]
    b = [p[1][criterion.key] for p in pairs]
    weights = None if criterion.kind == "pass_fail" else "quadratic"
    return {
        "key": criterion.key,
        "name": criterion.name,
        "n": len(pairs),
        "exact_agreement": exact_agreement(a, b),
        "kappa": cohen_kappa(a, b, labels=_labels(criterion), weights=weights),
        "kappa_kind": "cohen" if weights is None else "quadratic_weighted",
    }


def _numeric_pass(x: Any) -> float:
    return 1.0 if x == "pass" else 0.0


def agreement_report(*, session: Session, spec: EvalSpec, run_id: int | None = None) -> dict[str, Any]:
    """Return agreement per criterion, per grader pair, per grader (mean, bias against final) and per ISO week."""
    stmt = select(Grade).order_by(col(Grade.draft_id), col(Grade.grader_id))
    if run_id is not None:
        stmt = stmt.join(Draft, col(Draft.id) == Grade.draft_id).where(Draft.run_id == run_id)
    grades = list(session.exec(stmt))
    # Agreement is measured on the grades as first submitted, while graders were still blind:
    # later revisions (after seeing the other grade, or after rework) would inflate it.
    firsts: dict[int, dict[str, Any]] = {}
    if grades:
        for change in session.exec(
            select(GradeChange)
            .where(col(GradeChange.grade_id).in_([g.id for g in grades]), GradeChange.action == "create")
            .order_by(col(GradeChange.id))
        ):
            firsts.setdefault(change.grade_id, change.after or {})
    users = {u.id: (u.name or u.email) for u in session.exec(select(User))}
    by_draft: dict[int, list[Grade]] = defaultdict(list)
    for g in grades:
        by_draft[g.draft_id].append(g)
    pairs_by_grader: dict[tuple[int, int], list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    all_pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    weeks: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for draft_grades in by_draft.values():
        for g1, g2 in itertools.combinations(sorted(draft_grades, key=lambda g: g.grader_id), 2):
            s1 = firsts.get(g1.id or 0) or scores_of(g1)
            s2 = firsts.get(g2.id or 0) or scores_of(g2)
            pair = (s1, s2)
            pairs_by_grader[(g1.grader_id, g2.grader_id)].append(pair)
            all_pairs.append(pair)
            year, week, _ = as_utc(max(g1.created_at, g2.created_at, key=as_utc)).isocalendar()
            weeks[f"{year}-W{week:02d}"].append(pair)

    def disagreement_rate(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> float | None:
        if not pairs:
            return None
        return sum(bool(disagreement_reasons(spec=spec, a=a, b=b)) for a, b in pairs) / len(pairs)

    criteria = spec.rubric.criteria
    report: dict[str, Any] = {
        "run_id": run_id,
        "n_pairs": len(all_pairs),
        "disagreement_rate": disagreement_rate(all_pairs),
        "criteria": [_criterion_stats(c, all_pairs) for c in criteria],
        "pairs": [
            {
                "grader_ids": [a, b],
                "graders": [users.get(a, "?"), users.get(b, "?")],
                "n": len(pairs),
                "disagreement_rate": disagreement_rate(pairs),
                "criteria": [_criterion_stats(c, pairs) for c in criteria],
            }
            for (a, b), pairs in sorted(pairs_by_grader.items())
        ],
        "weeks": [
            {
                "week": week,
                "n": len(pairs),
                "disagreement_rate": disagreement_rate(pairs),
                "criteria": [_criterion_stats(c, pairs) for c in criteria],
            }
            for week, pairs in sorted(weeks.items())
        ],
    }
    finals = (
        {
            f.draft_id: f
            for f in session.exec(select(FinalGrade).where(col(FinalGrade.draft_id).in_(list(by_draft))))
        }
        if by_draft
        else {}
    )
    per_grader: dict[int, list[Grade]] = defaultdict(list)
    for g in grades:
        per_grader[g.grader_id].append(g)
    graders_out = []
    for grader_id, own in sorted(per_grader.items(), key=lambda kv: users.get(kv[0], "").lower()):
        rows = []
        for c in criteria:
            value = _numeric_pass if c.kind == "pass_fail" else float
            values = [value(getattr(g, c.key)) for g in own]
            diffs = [
                value(getattr(g, c.key)) - value(getattr(finals[g.draft_id], c.key))
                for g in own
                if g.draft_id in finals
            ]
            rows.append(
                {
                    "key": c.key,
                    "name": c.name,
                    "mean": sum(values) / len(values) if values else None,
                    "bias": sum(diffs) / len(diffs) if diffs else None,
                    "n_final": len(diffs),
                }
            )
        graders_out.append(
            {"grader_id": grader_id, "grader": users.get(grader_id, "?"), "n": len(own), "criteria": rows}
        )
    report["graders"] = graders_out
    return report
