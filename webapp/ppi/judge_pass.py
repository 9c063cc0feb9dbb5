"""The judge pass: prompt-evaluator's LLM judge scores every gradable draft of a run, for the PPI estimate.

Steps, each a function the command line (`prompt-evaluator judge-run`) and the tests call:

1. `plan_judge_pass` finds the run, the frozen judge version, and the drafts still to judge: the
   run's gradable drafts (the set the sampler samples: escalations and fallbacks have no text and
   are left out) less those already scored under that version. It builds each draft's request.
2. `judge_drafts` makes each draft's calls (webapp/ppi/judge_calls.py: the setup's k calls of the
   primary judge, the second judge's one) through the evaluator's `ChatClient` (its concurrency
   limit, answer cache and tenacity retries), parses each answer against the rubric's schema, and
   hands every finished batch to a `store` callback; one draft's bad answers or failed calls are
   reported with its draft id and stop nothing else.
3. `store_judgements` writes a batch with `record_judge_scores` (all or nothing per batch).

Decisions (see docs/ppi.md, "The judge pass"):

- **Judge version.** `"<model> <rubric name> sha256:<16 hex>"`, the hash taken over everything
  that decides the judge's answer besides the draft: the rubric's instructions (from its file, so
  its content hash is in them), the answer schema, the temperature, the seed, the layout of the
  user message built here (`layout_fingerprint`: a fixed example rendered by the same code), and
  the setup (calls per draft, second judge, log-probs). Changing the model, the rubric file, the
  seed or the setup gives a new version, and so new scores beside the old ones, never a silent
  mix. The single-call setup adds nothing to the hash: its version is the one made before issue 35.
- **Per draft, not per run.** A draft is stored whole (its four criteria and its raw calls) or not
  at all; the others are stored in batches as they finish, so an interrupted or partly failed
  pass keeps what it finished and a rerun judges only what is missing. The sampler refuses a run
  while any gradable draft lacks a score, so a partial pass cannot be sampled by mistake.
- **What the judge reads.** The ticket (and the task, account metadata and conversation when the
  case has them), the case's expected constraints, its reference response (the latest version a
  lead approved, else the dataset's `reference`; an unapproved version is a labeler's draft and is
  not shown), the current revisions of the KB articles the case lists (else of its intent's
  articles, as `evaluate-dataset` grounds drafts) and of every article the draft cites, and the
  draft in the layout `evaluate-dataset` gives its judge (intent, escalate, confidence,
  citations, text). A cited revision that is not current is named as such.
- **Factual accuracy.** The support-draft rubric scores it 0 or 1; 1 is stored as "pass", 0 as
  "fail". Another rubric may be used if it has the four metrics on the same scales.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from webapp.datasets.loader import TestCase
from webapp.datasets.models import EvalCase
from webapp.evaluator.client import ChatClient
from webapp.evaluator.rubric import Rubric, judge_instructions, judge_response_format
from webapp.evaluator.support import KbArticleText, KbContext, kb_from_database
from webapp.grading.models import ReferenceVersion
from webapp.kb.models import KbRevision
from webapp.kb.snapshot import revision_states
from webapp.ppi.judge_calls import MAX_MODEL_LENGTH, JudgeFailure, JudgeSetup, JudgeTarget, judge_one_draft
from webapp.ppi.judge_signals import REQUIRED_SCALES
from webapp.ppi.service import (
    CRITERIA,
    JudgeScoreIn,
    PpiError,
    gradable_drafts,
    judge_scores,
    record_judge_scores,
)
from webapp.runs.models import Draft, Run
from webapp.runs.service import RunNotFound, resolve_run

STORE_BATCH = 25  # drafts per transaction while the pass runs


def check_rubric(rubric: Rubric) -> None:
    """Refuse a rubric without the four criteria on the scales PPI reads; the message names the metric."""
    scales = {m.name: (m.scale.min, m.scale.max) for m in rubric.spec.metrics}
    for name, scale in REQUIRED_SCALES.items():
        if name not in scales:
            raise PpiError(f"rubric: {rubric.name!r} has no metric {name!r} (the judge pass needs {', '.join(CRITERIA)})")
        if scales[name] != scale:
            raise PpiError(
                f"rubric: metric {name!r} of {rubric.name!r} is scored {scales[name][0]}-{scales[name][1]}, "
                f"the judge pass needs {scale[0]}-{scale[1]}"
            )


def judge_version(*, model: str, rubric: Rubric, seed: int | None = None, setup: JudgeSetup | None = None) -> str:
    """Return the frozen judge version: the model, the rubric's name and a hash of all that shapes the judge's answers.

    The setup (calls, temperature, second judge, log-probs) is in the hash; the single-call judge's
    setup adds nothing to it, so its version is the one it had before issue 35.
    """
    model = model.strip()
    if not model:
        raise PpiError("judge_model: name the judge model")
    if len(model) > MAX_MODEL_LENGTH:
        raise PpiError(f"judge_model: at most {MAX_MODEL_LENGTH} characters")
    setup = setup or JudgeSetup()
    if setup.second_model == model:
        raise PpiError("second_judge_model: give another model than the judge model (more calls of one model: judge_calls)")
    frozen: dict[str, object] = {
        "layout": layout_fingerprint(),
        "instructions": judge_instructions(rubric),
        "response_format": judge_response_format(rubric),
        "seed": seed,
        **setup.frozen(),
    }
    digest = hashlib.sha256(json.dumps(frozen, sort_keys=True).encode()).hexdigest()
    return f"{model} {rubric.name[:30]} sha256:{digest[:16]}"


def layout_fingerprint() -> str:
    """Return the hash of a fixed example rendered by `judge_user_message`: it changes whenever the layout does.

    Part of the judge version, so that editing how the judge's message is written makes a new judge
    by itself, with nothing to remember to bump.
    """
    case = EvalCase(
        dataset_id=0,
        position=0,
        case_id="example",
        input="TICKET",
        task="TASK",
        expected_constraints="CONSTRAINTS",
        account={"plan": "PLAN"},
        conversation=[{"from": "customer", "text": "EARLIER"}],
        kb_articles=["KB-A"],
    )
    draft = Draft(
        run_id=0,
        case_pk=0,
        draft_text="DRAFT",
        citations=[{"article_id": "KB-A", "revision": 1}, {"article_id": "KB-B", "revision": 3}],
        intent="INTENT",
        confidence=0.5,
    )
    kb = KbContext(
        current={
            "KB-A": KbArticleText("KB-A", 2, "TITLE A", "BODY A", None),
            "KB-B": KbArticleText("KB-B", 3, "TITLE B", "BODY B", None),
        }
    )
    text = judge_user_message(case=case, draft=draft, kb=kb, cited={("KB-A", 1): "superseded"}, reference="REFERENCE")
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class JudgeRequest:
    """One draft's judge request (the messages; the model and settings are the plan's)."""

    draft_id: int
    case_id: str
    messages: list[dict[str, str]]


@dataclass
class JudgePlan:
    """What a judge pass will do: the run, the frozen version, and the requests of the drafts still to judge."""

    run_id: int
    run_name: str
    model: str
    rubric: Rubric
    seed: int | None
    version: str
    setup: JudgeSetup
    gradable: int
    already_scored: int
    requests: list[JudgeRequest] = field(default_factory=list)


@dataclass
class JudgeOutcome:
    """What `judge_drafts` did: the drafts scored (as stored) and those that failed."""

    scored: list[JudgeScoreIn] = field(default_factory=list)
    failures: list[JudgeFailure] = field(default_factory=list)


def plan_judge_pass(
    *,
    session: Session,
    run_ref: str | int,
    model: str,
    rubric: Rubric,
    seed: int | None = None,
    setup: JudgeSetup | None = None,
) -> JudgePlan:
    """Return the plan of a judge pass over a run: its version and the requests of the gradable drafts not yet scored."""
    check_rubric(rubric)
    setup = setup or JudgeSetup()
    version = judge_version(model=model, rubric=rubric, seed=seed, setup=setup)
    try:
        run = resolve_run(session=session, ref=run_ref)
    except RunNotFound as exc:
        raise PpiError(str(exc)) from exc
    assert run.id is not None
    rows = gradable_drafts(session=session, run_id=run.id)
    if not rows:
        raise PpiError(f"run: run {run.name!r} has no draft to judge (escalations and fallbacks have no text)")
    done = judge_scores(session=session, run_id=run.id, judge_version=version)
    todo = [(d, c) for d, c in rows if d.id not in done]
    plan = JudgePlan(
        run_id=run.id,
        run_name=run.name,
        model=model.strip(),
        rubric=rubric,
        seed=seed,
        version=version,
        setup=setup,
        gradable=len(rows),
        already_scored=len(rows) - len(todo),
    )
    if not todo:
        return plan
    kb = kb_from_database(session)
    cited = _cited_revisions(session, [d for d, _ in todo])
    references = _approved_references(session, {c.id for _, c in todo if c.id is not None})
    instructions = judge_instructions(rubric)
    for d, c in todo:
        assert d.id is not None and c.id is not None
        user = judge_user_message(
            case=c, draft=d, kb=kb, cited=cited, reference=references.get(c.id) or c.reference
        )
        plan.requests.append(
            JudgeRequest(
                draft_id=d.id,
                case_id=c.case_id,
                messages=[{"role": "system", "content": instructions}, {"role": "user", "content": user}],
            )
        )
    return plan


def _approved_references(session: Session, case_pks: set[int]) -> dict[int, str]:
    """Return each case's latest approved reference text (one query for the whole run)."""
    if not case_pks:
        return {}
    rows = session.exec(
        select(ReferenceVersion.case_pk, ReferenceVersion.text)
        .where(col(ReferenceVersion.case_pk).in_(sorted(case_pks)), col(ReferenceVersion.approved_at).is_not(None))
        .order_by(col(ReferenceVersion.version))
    ).all()
    return {pk: text for pk, text in rows}  # in version order: the latest approved one is kept


def _cited_revisions(session: Session, drafts: Sequence[Draft]) -> dict[tuple[str, int], str]:
    """Return the status of every revision the drafts cite, by (article id, revision)."""
    ids = sorted({str(c.get("article_id")) for d in drafts for c in d.citations if c.get("article_id")})
    if not ids:
        return {}
    rows = session.exec(
        select(KbRevision.article_id, KbRevision.revision, KbRevision.status).where(col(KbRevision.article_id).in_(ids))
    ).all()
    return revision_states(rows)  # what each revision is now (stored revisions keep their stated status)


def draft_for_judge(draft: Draft) -> str:
    """Return a stored draft as the judge reads it: the layout `evaluate-dataset` gives its judge."""
    cites = ", ".join(f"{c.get('article_id')} r{c.get('revision', '?')}" for c in draft.citations) or "none"
    confidence = draft.confidence
    return (
        f"Intent: {draft.intent or ''}\nEscalate: {str(draft.escalated).lower()}\n"
        f"Confidence: {confidence}\nCitations: {cites}\nDraft:\n{draft.draft_text}"
    )


def judge_user_message(
    *, case: EvalCase, draft: Draft, kb: KbContext, cited: dict[tuple[str, int], str], reference: str | None
) -> str:
    """Return the judge's user message for one draft: the case, the KB it could use, the reference, then the draft."""
    parts: list[str] = []
    if case.task:
        parts.append(f"TASK: {case.task}")
    parts.append(f"INPUT:\n{case.input}")
    if case.account:
        parts.append("ACCOUNT METADATA:\n" + json.dumps(case.account, ensure_ascii=False, sort_keys=True))
    if case.conversation:
        parts.append("CONVERSATION HISTORY:\n" + json.dumps(case.conversation, ensure_ascii=False))
    if case.expected_constraints:
        parts.append(f"EXPECTED CONSTRAINTS:\n{case.expected_constraints}")
    if reference:
        parts.append(f"REFERENCE OUTPUT:\n{reference}")
    meta: dict[str, Any] = {}
    if case.kb_articles:
        meta["kb_articles"] = list(case.kb_articles)
    if case.intent:
        meta["intent"] = case.intent
    articles: list[KbArticleText] = kb.for_case(TestCase(id=case.case_id, input=case.input, metadata=meta))
    shown = {a.article_id for a in articles}
    stale: list[str] = []
    for c in draft.citations:
        article_id, revision = str(c.get("article_id")), c.get("revision")
        current = kb.current.get(article_id)
        if current is not None and article_id not in shown:
            articles.append(current)
            shown.add(article_id)
        if current is None or current.revision != revision:
            status = cited.get((article_id, revision), "not in the KB") if isinstance(revision, int) else "not in the KB"
            stale.append(f"{article_id} revision {revision}: {status}")
    kb_text = "\n\n".join(f"[{a.article_id} revision {a.revision}] {a.title}\n{a.body}" for a in articles) or "(none)"
    parts.append(f"KB ARTICLES GIVEN TO THE WRITER (current revisions):\n{kb_text}")
    if stale:
        parts.append("CITED REVISIONS THAT ARE NOT CURRENT:\n" + "\n".join(stale))
    parts.append(f"OUTPUT:\n{draft_for_judge(draft)}")
    return "\n\n".join(parts)


async def judge_drafts(
    *,
    plan: JudgePlan,
    client: ChatClient,
    store: Callable[[list[JudgeScoreIn]], None],
    on_done: Callable[[int, bool], None] = lambda draft_id, ok: None,
    batch: int = STORE_BATCH,
    second_client: ChatClient | None = None,
) -> JudgeOutcome:
    """Judge every planned draft concurrently; hand finished scores to `store` in batches; return scores and failures.

    Each draft gets the setup's calls (webapp/ppi/judge_calls.py), all through the evaluator's client;
    the second judge's call goes through `second_client` when its endpoint differs. A refused
    endpoint (bad key, unknown model) raises LlmConfigError at once, after storing what finished.
    """
    outcome = JudgeOutcome()
    pending: list[JudgeScoreIn] = []

    def flush() -> None:
        if pending:
            done = list(pending)
            pending.clear()  # taken out first: a batch the store refuses is not offered twice
            store(done)
            outcome.scored.extend(done)

    async def one(req: JudgeRequest) -> None:
        target = JudgeTarget(req.draft_id, req.case_id, req.messages, plan.model, plan.rubric, plan.seed, plan.setup)
        judged = await judge_one_draft(target, client=client, second_client=second_client or client)
        if isinstance(judged, JudgeFailure):
            outcome.failures.append(judged)
            on_done(req.draft_id, False)
            return
        pending.append(judged)
        if len(pending) >= batch:
            flush()
        on_done(req.draft_id, True)

    tasks = [asyncio.ensure_future(one(r)) for r in plan.requests]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        flush()  # what finished before the refusal or Ctrl-C is kept
        raise
    flush()
    outcome.failures.sort(key=lambda f: f.draft_id)
    return outcome


def store_judgements(*, session: Session, plan: JudgePlan, scores: Sequence[JudgeScoreIn]) -> int:
    """Store a batch of the pass's scores under its judge version, all or nothing; return how many."""
    if session.get(Run, plan.run_id) is None:
        raise PpiError(f"run: run {plan.run_name!r} no longer exists")
    return record_judge_scores(session=session, run_id=plan.run_id, judge_version=plan.version, scores=scores)
