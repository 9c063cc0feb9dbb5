"""Factories for test data, in one place. Each takes the session first and flushes (not commits)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from sqlmodel import Session, select

from webapp.auth import service as auth_service
from webapp.auth.models import User
from webapp.datasets.models import Dataset, EvalCase
from webapp.evaluator.models import EvaluatorJudgeScore, EvaluatorRun
from webapp.kb.models import KbArticle, KbRevision
from webapp.runs.models import Draft, Run

DEFAULT_PASSWORD = "correct-horse-battery"


def make_user(
    session: Session, *, email: str, roles: Iterable[str], password: str = DEFAULT_PASSWORD, name: str = ""
) -> User:
    """Create a user with roles."""
    return auth_service.create_user(session=session, email=email, password=password, roles=roles, name=name)


def make_article(
    session: Session,
    article_id: str,
    revisions: Sequence[tuple[int, str]] = ((1, "current"),),
    *,
    title: str | None = None,
    body: str | None = None,
    intent: str | None = None,
) -> KbArticle:
    """Create a KB article with revisions given as (number, status)."""
    art = KbArticle(article_id=article_id, intent=intent)
    session.add(art)
    session.flush()
    for number, status in revisions:
        session.add(
            KbRevision(
                article_id=article_id,
                revision=number,
                title=title or f"{article_id} title",
                body=body or f"Body of {article_id} revision {number}.",
                status=status,
                effective_date=dt.date(2026, 1, number if number <= 28 else 28),
            )
        )
    session.flush()
    return art


def make_dataset(session: Session, cases: Sequence[dict[str, Any]], *, name: str = "eval", version: int = 1) -> Dataset:
    """Create a dataset with cases given as dicts of EvalCase fields (case_id and input at least)."""
    ds = Dataset(name=name, version=version, sha256="sha256:" + f"{version:064x}", format=".jsonl", count=len(cases))
    session.add(ds)
    session.flush()
    for position, fields in enumerate(cases):
        data = {"input": "Customer message", **fields}
        session.add(EvalCase(dataset_id=ds.id, position=position, **data))  # type: ignore[arg-type]
    session.flush()
    return ds


def make_run(
    session: Session, dataset: Dataset, drafts: Sequence[dict[str, Any]] = (), *, name: str = "run-1", **fields: Any
) -> Run:
    """Create a run over a dataset; each draft dict names its case by `case_id` plus Draft fields."""
    run = Run(name=name, dataset_id=dataset.id, model=fields.pop("model", "test-model"), **fields)  # type: ignore[arg-type]
    session.add(run)
    session.flush()
    cases = {c.case_id: c for c in session.exec(select(EvalCase).where(EvalCase.dataset_id == dataset.id))}
    for d in drafts:
        d = dict(d)
        case = cases[d.pop("case_id")]
        session.add(Draft(run_id=run.id, case_pk=case.id, **d))  # type: ignore[arg-type]
    session.flush()
    return run


def make_judge_score(
    session: Session, run: Run, draft_id: int, scores: dict[str, Any], rationale: str | None = None
) -> EvaluatorJudgeScore:
    """Record the prompt-evaluator judge's scores of a draft (with the run's evaluator run, made if it has none)."""
    ev = session.exec(select(EvaluatorRun).where(EvaluatorRun.run_id == run.id)).first()
    if ev is None:
        ev = EvaluatorRun(
            run_id=run.id,  # type: ignore[arg-type]
            artifact_run_id=f"art-{run.id}",
            status="completed",
            dataset_hash="sha256:" + "0" * 64,
            rubric_name="r",
            rubric_hash="sha256:" + "1" * 64,
            generator_model="gen",
            judge_model="judge",
            temperature=0.0,
            num_samples=1,
        )
        session.add(ev)
        session.flush()
    score = EvaluatorJudgeScore(
        evaluator_run_id=ev.id,  # type: ignore[arg-type]
        draft_id=draft_id,
        sample_status="completed",
        scores=scores,
        rationale=rationale,
    )
    session.add(score)
    session.flush()
    return score


def words(n: int, word: str = "word") -> str:
    """Return a text of exactly n words."""
    return " ".join([word] * n)
