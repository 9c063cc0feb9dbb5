"""Inter-grader agreement per criterion, grader pair, grader and ISO week."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping

from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.core.spec import Criterion, EvalSpec
from webapp.core.timeutil import as_utc
from webapp.grading.models import (
    FinalGrade,
    Grade,
    GradeChange,
)
from webapp.grading.schemas import (
    AgreementPublic,
    CriterionAgreementPublic,
    GraderCriterionPublic,
    GraderPublic,
    PairAgreementPublic,
    WeekAgreementPublic,
)
from webapp.grading.scores import disagreement_reasons, scores_of
from webapp.grading.stats import cohen_kappa, exact_agreement
from webapp.runs.models import Draft

# Two graders' scores of one draft (as first submitted): criterion key -> score.
ScorePair = tuple[Mapping[str, object], Mapping[str, object]]


def _labels(criterion: Criterion) -> list[Hashable]:
    if criterion.kind == "pass_fail":
        return ["fail", "pass"]
    assert criterion.min is not None and criterion.max is not None
    return list(range(criterion.min, criterion.max + 1))


def _criterion_stats(criterion: Criterion, pairs: list[ScorePair]) -> CriterionAgreementPublic:
    a: list[Hashable] = [p[0][criterion.key] for p in pairs]
    b: list[Hashable] = [p[1][criterion.key] for p in pairs]
    weights = None if criterion.kind == "pass_fail" else "quadratic"
    return CriterionAgreementPublic(
        key=criterion.key,
        name=criterion.name,
        n=len(pairs),
        exact_agreement=exact_agreement(a, b),
        kappa=cohen_kappa(a, b, labels=_labels(criterion), weights=weights),
        kappa_kind="cohen" if weights is None else "quadratic_weighted",
    )


def _numeric_pass(x: object) -> float:
    return 1.0 if x == "pass" else 0.0


def _as_float(x: object) -> float:
    assert isinstance(x, int | float)
    return float(x)


def _first_scores(session: Session, grades: list[Grade]) -> dict[int, Mapping[str, object]]:
    """Return each grade's scores as first submitted (its "create" entry of the history).

    Agreement is measured on these, while graders were still blind: later revisions (after seeing
    the other grade, or after rework) would inflate it.
    """
    firsts: dict[int, Mapping[str, object]] = {}
    if grades:
        for change in session.exec(
            select(GradeChange)
            .where(col(GradeChange.grade_id).in_([g.id for g in grades]), GradeChange.action == "create")
            .order_by(col(GradeChange.id))
        ):
            firsts.setdefault(change.grade_id, change.after or {})
    return firsts


def _pairs(
    grades: list[Grade], firsts: dict[int, Mapping[str, object]]
) -> tuple[list[ScorePair], dict[tuple[int, int], list[ScorePair]], dict[str, list[ScorePair]]]:
    """Return every pair of grades of one draft: all of them, per grader pair and per ISO week of the later grade."""
    by_draft: dict[int, list[Grade]] = defaultdict(list)
    for g in grades:
        by_draft[g.draft_id].append(g)
    by_graders: dict[tuple[int, int], list[ScorePair]] = defaultdict(list)
    every: list[ScorePair] = []
    weeks: dict[str, list[ScorePair]] = defaultdict(list)
    for draft_grades in by_draft.values():
        for g1, g2 in itertools.combinations(sorted(draft_grades, key=lambda g: g.grader_id), 2):
            pair = (firsts.get(g1.id or 0) or scores_of(g1), firsts.get(g2.id or 0) or scores_of(g2))
            by_graders[(g1.grader_id, g2.grader_id)].append(pair)
            every.append(pair)
            year, week, _ = as_utc(max(g1.created_at, g2.created_at, key=as_utc)).isocalendar()
            weeks[f"{year}-W{week:02d}"].append(pair)
    return every, by_graders, weeks


def _grader_row(
    grader_id: int, name: str, own: list[Grade], finals: dict[int, FinalGrade], criteria: list[Criterion]
) -> GraderPublic:
    """Return a grader's mean score per criterion and bias against the final grades (pass counts 1, fail 0)."""
    rows: list[GraderCriterionPublic] = []
    for c in criteria:
        value: Callable[[object], float] = _numeric_pass if c.kind == "pass_fail" else _as_float
        values = [value(getattr(g, c.key)) for g in own]
        diffs = [
            value(getattr(g, c.key)) - value(getattr(finals[g.draft_id], c.key)) for g in own if g.draft_id in finals
        ]
        rows.append(
            GraderCriterionPublic(
                key=c.key,
                name=c.name,
                mean=sum(values) / len(values) if values else None,
                bias=sum(diffs) / len(diffs) if diffs else None,
                n_final=len(diffs),
            )
        )
    return GraderPublic(grader_id=grader_id, grader=name, n=len(own), criteria=rows)


def agreement_report(*, session: Session, spec: EvalSpec, run_id: int | None = None) -> AgreementPublic:
    """Return agreement per criterion, per grader pair, per grader (mean, bias against final) and per ISO week."""
    stmt = select(Grade).order_by(col(Grade.draft_id), col(Grade.grader_id))
    if run_id is not None:
        stmt = stmt.join(Draft, col(Draft.id) == Grade.draft_id).where(Draft.run_id == run_id)
    grades = list(session.exec(stmt))
    users = {u.id: (u.name or u.email) for u in session.exec(select(User))}
    every, by_graders, weeks = _pairs(grades, _first_scores(session, grades))

    def disagreement_rate(pairs: list[ScorePair]) -> float | None:
        if not pairs:
            return None
        return sum(bool(disagreement_reasons(spec=spec, a=a, b=b)) for a, b in pairs) / len(pairs)

    criteria = spec.rubric.criteria
    draft_ids = sorted({g.draft_id for g in grades})
    finals = (
        {f.draft_id: f for f in session.exec(select(FinalGrade).where(col(FinalGrade.draft_id).in_(draft_ids)))}
        if draft_ids
        else {}
    )
    per_grader: dict[int, list[Grade]] = defaultdict(list)
    for g in grades:
        per_grader[g.grader_id].append(g)
    return AgreementPublic(
        run_id=run_id,
        n_pairs=len(every),
        disagreement_rate=disagreement_rate(every),
        criteria=[_criterion_stats(c, every) for c in criteria],
        pairs=[
            PairAgreementPublic(
                grader_ids=[a, b],
                graders=[users.get(a, "?"), users.get(b, "?")],
                n=len(pairs),
                disagreement_rate=disagreement_rate(pairs),
                criteria=[_criterion_stats(c, pairs) for c in criteria],
            )
            for (a, b), pairs in sorted(by_graders.items())
        ],
        graders=[
            _grader_row(grader_id, users.get(grader_id, "?"), own, finals, criteria)
            for grader_id, own in sorted(per_grader.items(), key=lambda kv: users.get(kv[0], "").lower())
        ],
        weeks=[
            WeekAgreementPublic(
                week=week,
                n=len(pairs),
                disagreement_rate=disagreement_rate(pairs),
                criteria=[_criterion_stats(c, pairs) for c in criteria],
            )
            for week, pairs in sorted(weeks.items())
        ],
    )
