"""PPI test data: a run of drafts over a mixed dataset, with the judge's scores of every draft."""

from __future__ import annotations

from sqlmodel import Session, col, select

from tests.evaluator.conftest import cache_dir, fake  # noqa: F401  (for test_judge_pass)
from tests.factories import make_dataset, make_run
from webapp.ppi.service import JudgeScoreIn, record_judge_scores
from webapp.runs.models import Draft, Run

JUDGE = "judge-v1"


def category_of(i: int) -> str:
    """Return the stratum of case i: 10% safety, 10% adversarial, 20% edge, 60% routine."""
    return {0: "safety", 1: "adversarial", 2: "edge", 3: "edge"}.get(i % 10, "routine")


def build_run(session: Session, *, n: int = 200, name: str = "run-1", dataset_name: str = "eval", golden: int = 2) -> tuple[Run, list[Draft]]:
    """Create a dataset of n cases and a run with one draft per case; judge scores for all under JUDGE."""
    cases = [
        {"case_id": f"{dataset_name}-case-{i}", "category": category_of(i), "golden": 13 < i <= 13 + golden}
        for i in range(n)
    ]
    ds = make_dataset(session, cases, name=dataset_name)
    run = make_run(session, ds, [{"case_id": c["case_id"], "draft_text": "Hello"} for c in cases], name=name)
    drafts = list(session.exec(select(Draft).where(Draft.run_id == run.id).order_by(col(Draft.id))))
    scores = [
        JudgeScoreIn(
            draft_id=d.id,  # type: ignore[arg-type]
            factual_accuracy="fail" if k % 7 == 0 else "pass",
            citation_relevance=1 + k % 5, tone=4, completeness=3 + k % 3,
            raw_calls=[{"request": {"draft": d.id}, "response": "{}"}],
        )
        for k, d in enumerate(drafts)
    ]
    assert run.id is not None
    record_judge_scores(session=session, run_id=run.id, judge_version=JUDGE, scores=scores)
    return run, drafts
