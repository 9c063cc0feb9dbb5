"""The demo: stratification, golden cases, planted failures, determinism, idempotent re-seed, CLI."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import Session, col, select

from tests.datasets.helpers import count_rows, invoke
from webapp.auth import service as auth_service
from webapp.auth.models import User
from webapp.checks import service as checks_service
from webapp.checks.rules import run_checks
from webapp.checks.types import Citation, DraftInput
from webapp.core.spec import EvalSpec
from webapp.datasets.loader import load_dataset
from webapp.datasets.models import Dataset, EvalCase
from webapp.demo import content as c
from webapp.demo.seed import DemoContext, seed_demo
from webapp.kb import service as kb_service
from webapp.kb.models import KbArticle, KbRevision
from webapp.runs.models import Draft, Run


class TestContent:
    def test_same_seed_same_content_and_golden_ids_for_every_seed(self) -> None:
        assert c.build_content(7).content_hash == c.build_content(7).content_hash
        assert c.build_content(7).dataset_jsonl == c.build_content(7).dataset_jsonl
        assert c.build_content(7).content_hash != c.build_content(8).content_hash
        for seed in (1, 7, 99):
            golden = [x["id"] for x in c.build_content(seed).cases if x["golden"]]
            assert sorted(golden) == sorted(c.GOLDEN_IDS)

    def test_dataset_jsonl_is_the_format_guides(self, tmp_path: Path) -> None:
        path = tmp_path / "support-eval-v1.jsonl"
        path.write_bytes(c.build_content(7).dataset_jsonl)
        cases, meta = load_dataset(path)
        assert meta["count"] == 100 and len({x.id for x in cases}) == 100
        assert all(x.metadata["category"] in ("routine", "edge", "adversarial", "safety") for x in cases)


def _body(revision: KbRevision | None) -> str:
    """Return a revision's text (the revision must exist)."""
    assert revision is not None
    return revision.body


@pytest.fixture
def seeded(session: Session, spec: EvalSpec) -> DemoContext:
    """The demo's context; on the session's seeded template (see TestSeededDemo) seed_demo only reads it."""
    ctx = seed_demo(session=session, spec=spec)
    session.commit()
    return ctx


class TestSeededDemo:
    @pytest.fixture
    def db_url(self, demo_db_url: str) -> str:
        """What the seed wrote, read from a copy of the demo seeded once per session (tests/conftest.py)."""
        return demo_db_url

    def test_stratification(self, session: Session, seeded: DemoContext, spec: EvalSpec) -> None:
        ds = session.exec(select(Dataset).where(Dataset.name == "support-eval-v1")).one()
        rows = session.exec(select(EvalCase.category, EvalCase.intent).where(EvalCase.dataset_id == ds.id)).all()
        assert Counter(cat for cat, _ in rows) == {"routine": 60, "edge": 20, "adversarial": 10, "safety": 10}
        per = Counter(rows)
        for intent in spec.intents:  # spread evenly across the ten intents of the spec
            assert (per[("routine", intent)], per[("edge", intent)], per[("adversarial", intent)], per[("safety", intent)]) == (6, 2, 1, 1), intent
        assert ds.count == 100
        file_hash = hashlib.sha256(c.build_content(7).dataset_jsonl).hexdigest()
        assert seeded.dataset.sha256 == f"sha256:{file_hash}"  # the real file's hash

    def test_golden_examples(self, seeded: DemoContext) -> None:
        golden = {cid: case for cid, case in seeded.cases.items() if case.golden}
        assert set(golden) == set(c.GOLDEN_IDS)
        assert (golden["golden-happy-path"].intent, golden["golden-happy-path"].kb_articles) == ("billing_charge", ["KB-1042"])
        assert golden["golden-edge-downgrade-exports"].kb_articles == ["KB-2011", "KB-2098"]
        assert golden["golden-edge-downgrade-exports"].category == "edge"
        assert golden["golden-unacceptable-refund"].expected_behavior == "fallback"
        assert (golden["golden-safety-distress"].category, golden["golden-safety-distress"].expected_behavior) == ("safety", "escalate")
        assert golden["golden-regression-2fa"].kb_articles == ["KB-3001"]
        assert golden["golden-happy-path"].account["billing_cycle_day"] == 15

    def test_kb(self, session: Session, seeded: DemoContext) -> None:
        assert 14 <= count_rows(session, KbArticle) <= 17
        revs = {r.revision: r.status for r in kb_service.get_revisions(session=session, article_id="KB-3001")}
        assert revs[2] == "deprecated" and revs[4] == "current"
        assert "SMS" in _body(kb_service.get_revision(session=session, article_id="KB-3001", revision=2))
        assert "authenticator app only" in _body(kb_service.current_revision(session=session, article_id="KB-3001"))
        assert "own cycle" in _body(kb_service.current_revision(session=session, article_id="KB-1042"))
        assert "no scheduled data exports" in _body(kb_service.current_revision(session=session, article_id="KB-2098"))
        assert kb_service.current_revision(session=session, article_id="KB-2011") is not None
        states = {a.article_id: a.status for a in kb_service.list_articles(session=session)}
        assert "deleted" in states.values()
        intents = {a.intent for a in kb_service.list_articles(session=session)}
        assert len(intents) == 10

    def test_users_one_per_role(self, session: Session, seeded: DemoContext) -> None:
        assert set(seeded.users) == {"labeler", "labeler2", "lead", "pm", "support_lead", "ml_lead", "admin"}
        for key, email, _name, roles in c.DEMO_USERS:
            limits = auth_service.LoginLimits(max_failures=5, account_max_failures=50, window_minutes=15)
            user = auth_service.sign_in(session=session, email=email, password="demo-password", ip="t", limits=limits)
            assert user is not None and user.id is not None, email
            assert auth_service.user_roles(session=session, user_id=user.id) == set(roles)
            assert seeded.users[key].email == email

    def test_run_and_planted_failures(self, seeded: DemoContext) -> None:
        run = seeded.run
        assert (run.name, run.model, run.prompt_version) == ("demo-run-1", "drafter-2026-10", "v3")
        d = seeded.drafts
        assert len(d) == 100
        refund = d["golden-unacceptable-refund"]
        assert refund.draft_text.startswith("Hi ") and "I've processed your refund and you should see it within 5-7 business days" in refund.draft_text
        assert refund.confidence == 0.82 and refund.citations == []
        twofa = d["golden-regression-2fa"]
        assert twofa.citations == [{"article_id": "KB-3001", "revision": 2}] and "SMS" in twofa.draft_text
        distress = d["golden-safety-distress"]
        assert distress.escalated is False and distress.draft_text and "Sorry to hear about your experience" in distress.draft_text
        pii = d["routine-017"].draft_text
        assert "jordan.blake@example.com" in pii and "(415) 555-0134" in pii
        low = d["edge-004"]
        assert low.confidence == 0.42 and low.draft_text

    def test_only_planted_drafts_fail_the_checks_and_the_others_are_good(
        self, session: Session, seeded: DemoContext, spec: EvalSpec
    ) -> None:
        kb = kb_service.kb_snapshot(session=session)
        failing: dict[str, set[str]] = {}
        for case_id, draft in seeded.drafts.items():
            case = seeded.cases[case_id]
            citations = tuple(Citation(x["article_id"], x["revision"]) for x in draft.citations)
            checked = DraftInput(draft.draft_text, citations, draft.confidence, draft.intent, draft.escalated)
            results = run_checks(draft=checked, case=checks_service.case_input(case), kb=kb, spec=spec)
            bad = {r.key for r in results if r.failed}
            if bad:
                failing[case_id] = bad
            assert draft.intent in spec.intents
            if case_id in c.PLANTED_CASES:
                continue
            if case.category == "safety":
                assert draft.escalated and draft.draft_text is None, case_id
            elif draft.draft_text is not None:
                assert 50 <= len(draft.draft_text.split()) <= 500, case_id
                assert draft.confidence >= spec.checks.confidence_fallback and draft.citations, case_id
            else:
                assert draft.confidence < spec.checks.confidence_fallback, case_id
        assert failing == {
            "golden-regression-2fa": {"citations_current"},
            # The planted drafts of the distress and refund cases cite no KB article (the spec: a
            # draft cites its sources), besides what they were planted for.
            "golden-safety-distress": {"safety_escalation", "expected_behavior", "citations_current"},
            "routine-017": {"no_pii"},
            "edge-004": {"low_confidence_fallback", "expected_behavior"},
            # The refund case expects a fallback, so showing a draft fails expected behaviour; that the
            # promise is fabricated only human grading (factual accuracy) can tell.
            "golden-unacceptable-refund": {"expected_behavior", "citations_current"},
        }

    def test_reseed_is_a_noop(self, session: Session, seeded: DemoContext, spec: EvalSpec) -> None:
        before = {m.__name__: count_rows(session, m) for m in (User, KbArticle, Dataset, EvalCase, Run, Draft)}
        ctx = seed_demo(session=session, spec=spec)
        session.commit()
        after = {m.__name__: count_rows(session, m) for m in (User, KbArticle, Dataset, EvalCase, Run, Draft)}
        assert before == after
        assert ctx.run.id == seeded.run.id and len(ctx.cases) == 100


@pytest.mark.slow
class TestDeterminism:
    def test_same_seed_same_database_content(self, session: Session, spec: EvalSpec, tmp_path: Path) -> None:
        from webapp.core.db import make_engine
        from webapp.core.models import metadata

        seed_demo(session=session, spec=spec, hooks=False)
        session.commit()
        other = make_engine(f"sqlite:///{tmp_path / 'other.db'}")
        metadata.create_all(other)
        with Session(other) as s2:
            seed_demo(session=s2, spec=spec, hooks=False)
            s2.commit()

            def snapshot(s: Session) -> list[tuple]:
                rows = s.exec(
                    select(EvalCase.case_id, Draft.draft_text, Draft.confidence, Draft.escalated)
                    .join(EvalCase, col(EvalCase.id) == col(Draft.case_pk))
                    .order_by(col(EvalCase.position))
                ).all()
                return [tuple(r) for r in rows]

            assert snapshot(session) == snapshot(s2)
            assert session.exec(select(Dataset.sha256)).one() == s2.exec(select(Dataset.sha256)).one()
        other.dispose()


@pytest.mark.slow
def test_domain_hooks_run(session: Session, spec: EvalSpec) -> None:
    hooks_run = seed_demo(session=session, spec=spec).extra["hooks_run"]
    assert isinstance(hooks_run, list) and "checks" in hooks_run


class TestDemoCli:
    def test_export_dataset(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        out = tmp_path / "eval.jsonl"
        r = invoke(monkeypatch, "sqlite://", ["demo", "--export-dataset", str(out), "--export-kb", str(tmp_path / "kb.jsonl")])
        assert r.exit_code == 0, r.output
        assert out.read_bytes() == c.build_content(7).dataset_jsonl
        assert (tmp_path / "kb.jsonl").read_bytes() == c.build_content(7).kb_jsonl

    @pytest.mark.slow
    def test_seed_only_in_configured_database(self, db_url: str, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
        r = invoke(monkeypatch, db_url, ["demo", "--seed-only"])
        assert r.exit_code == 0, r.output
        assert "seeded" in r.output and "admin@demo.draftdesk" in r.output and "demo-password" in r.output
        for _key, email, _n, _r in c.DEMO_USERS:
            assert email in r.output
        demo_run = select(func.count()).select_from(Draft).join(Run, col(Run.id) == Draft.run_id).where(Run.name == "demo-run-1")
        assert session.exec(demo_run).one() == 100
        total = count_rows(session, Draft)  # demo-run-1 and demo-ppi (webapp/ppi/demo.py)
        again = invoke(monkeypatch, db_url, ["demo", "--seed-only"])
        assert again.exit_code == 0 and "already seeded" in again.output
        assert count_rows(session, Draft) == total
