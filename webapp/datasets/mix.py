"""An eval set's stratified mix and intents against the plan (spec `dataset.categories` and `intents`).

The plan samples the eval set 60% routine, 20% edge, 10% adversarial, 10% safety, from the top ten
intents. A set matches the plan when every category's share lies within MIX_TOLERANCE_POINTS of
its planned share, every case has a category, and no case has an intent outside the ten.

Decisions (documented in docs/data-in.md):
- Tolerance is +-5 percentage points per category (55-65 routine, 15-25 edge, 5-15 adversarial
  and safety on 100 cases): a stratified sample of 100 or 250 hits the plan within a few cases,
  and 5 points is where a set starts to weigh a category visibly differently from the plan.
- A case without a category counts in the total but in no category, so it pulls the shares off.
- A case without an intent is reported, but does not make the set mismatch: the intent label is
  optional metadata in the format guide, and an unknown intent is not one outside the ten.
- The import warns and still imports (a set under construction is legitimate); the launch gates
  refuse to pass on a set that does not match (webapp.gates.criteria.automated_checks).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlmodel import Session, col, select

from webapp.core.spec import CATEGORIES, EvalSpec
from webapp.datasets.models import EvalCase

MIX_TOLERANCE_POINTS = 5.0
EPS = 1e-9
NAMES_SHOWN = 10  # case ids named in one warning line; the rest are counted


@dataclass(frozen=True)
class CategoryShare:
    """One category of the set: how many cases, their share, and the plan's share."""

    category: str
    count: int
    share: float
    planned: float
    tolerance_points: float = MIX_TOLERANCE_POINTS

    @property
    def deviation_points(self) -> float:
        """Share minus planned share, in percentage points."""
        return (self.share - self.planned) * 100

    @property
    def within(self) -> bool:
        return abs(self.deviation_points) <= self.tolerance_points + EPS


@dataclass(frozen=True)
class DatasetMix:
    """The set's mix against the plan, and the cases whose intent is outside the plan's ten."""

    total: int
    categories: tuple[CategoryShare, ...]
    uncategorised: tuple[str, ...] = ()
    off_plan_intents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    no_intent: tuple[str, ...] = ()
    tolerance_points: float = MIX_TOLERANCE_POINTS
    plan_intents: int = 10  # how many intents the plan supports (len(spec.intents))

    @property
    def mix_matches(self) -> bool:
        return self.total > 0 and not self.uncategorised and all(c.within for c in self.categories)

    @property
    def intents_match(self) -> bool:
        return not self.off_plan_intents

    @property
    def matches_plan(self) -> bool:
        return self.mix_matches and self.intents_match

    def mix_text(self) -> str:
        """Return 'routine 60 (60.0%), edge 20 (20.0%), ...'."""
        return ", ".join(f"{c.category} {c.count} ({c.share * 100:.1f}%)" for c in self.categories)

    def plan_text(self) -> str:
        """Return 'routine 60%, edge 20%, ... ± 5 pts'."""
        return ", ".join(f"{c.category} {c.planned * 100:g}%" for c in self.categories) + f" (± {self.tolerance_points:g} pts)"

    def warnings(self) -> list[str]:
        """One sentence per way the set departs from the plan, and a note on cases without an intent."""
        out = self.mismatches()
        if self.no_intent:
            out.append(f"{_cases(self.no_intent)} no intent label")
        return out

    def mismatches(self) -> list[str]:
        """One sentence per way the set departs from the plan (empty: it matches the plan)."""
        out: list[str] = []
        if self.total == 0:
            return ["the set has no cases"]
        off = [c for c in self.categories if not c.within]
        if off:
            out.append(
                "the category mix does not match the plan's stratified sample: "
                + ", ".join(
                    f"{c.category} {c.share * 100:.1f}% (plan {c.planned * 100:g}% ± {c.tolerance_points:g} pts)" for c in off
                )
            )
        if self.uncategorised:
            out.append(f"{_cases(self.uncategorised)} no category (routine, edge, adversarial or safety)")
        for intent, ids in self.off_plan_intents.items():
            out.append(f"intent '{intent}' is not one of the plan's top-{self.plan_intents} intents: {_cases(ids, verb=False)}")
        return out


def _cases(ids: tuple[str, ...], *, verb: bool = True) -> str:
    shown = ", ".join(ids[:NAMES_SHOWN]) + (f" and {len(ids) - NAMES_SHOWN} more" if len(ids) > NAMES_SHOWN else "")
    noun = "case" if len(ids) == 1 else "cases"
    return f"{len(ids)} {noun} ({shown})" + ((" has" if len(ids) == 1 else " have") if verb else "")


def dataset_mix(cases: Iterable[tuple[str, str | None, str | None]], spec: EvalSpec) -> DatasetMix:
    """Return the mix of (case_id, category, intent) rows against the spec's plan."""
    rows = list(cases)
    total = len(rows)
    planned: dict[str, float] = {str(k): v for k, v in spec.dataset.categories.items()}
    counts = {c: 0 for c in CATEGORIES}
    uncategorised: list[str] = []
    off: dict[str, list[str]] = {}
    no_intent: list[str] = []
    supported = set(spec.intents)
    for case_id, category, intent in rows:
        if category in counts:
            counts[category] += 1
        else:
            uncategorised.append(case_id)
        if not intent:
            no_intent.append(case_id)
        elif intent not in supported:
            off.setdefault(intent, []).append(case_id)
    shares = tuple(
        CategoryShare(c, counts[c], counts[c] / total if total else 0.0, float(planned.get(c, 0.0)))
        for c in CATEGORIES
    )
    return DatasetMix(
        total=total,
        categories=shares,
        uncategorised=tuple(uncategorised),
        off_plan_intents={k: tuple(v) for k, v in sorted(off.items())},
        no_intent=tuple(no_intent),
        plan_intents=len(spec.intents),
    )


def mix_of_dataset(*, session: Session, spec: EvalSpec, dataset_id: int) -> DatasetMix:
    """Return a stored dataset's mix against the plan."""
    rows = session.exec(
        select(EvalCase.case_id, EvalCase.category, EvalCase.intent)
        .where(EvalCase.dataset_id == dataset_id)
        .order_by(col(EvalCase.position))
    ).all()
    return dataset_mix(((cid, cat, intent) for cid, cat, intent in rows), spec)
