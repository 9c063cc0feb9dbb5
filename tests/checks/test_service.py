"""Checking runs: stored results, pass rates worked out by hand, re-check after a KB change, the CLI gate."""

from __future__ import annotations

import io

import pytest
import typer
from rich.console import Console
from sqlmodel import Session, select

from tests.checks.conftest import World, escalation, good
from tests.factories import make_dataset, make_run
from webapp.checks import draft_checks, service
from webapp.checks.cli import check_and_report
from webapp.checks.models import DraftCheck
from webapp.checks.types import CHECK_KEYS
from webapp.core.spec import EvalSpec
from webapp.kb.models import KbRevision
from webapp.runs.models import Run
from webapp.runs.service import DraftNotFound, resolve_run


def _id(run: Run) -> int:
    """Return a saved run's id (typed: a saved row always has one)."""
    assert run.id is not None
    return run.id


class TestCheckRun:
    def test_stores_one_result_per_check_and_draft_and_recheck_replaces(
        self, session: Session, spec: EvalSpec, world: World
    ) -> None:
        for _ in range(2):  # the second pass replaces the rows rather than adding to them
            result = service.check_run(session=session, spec=spec, run_id=_id(world.a))
            rows = session.exec(select(DraftCheck).where(DraftCheck.run_id == world.a.id)).all()
            assert result.drafts == 8 and len(rows) == 8 * len(CHECK_KEYS)
            assert {r.kb_version for r in rows} == {result.kb_version}


class TestRunSummary:
    def test_pass_rates_match_hand_count(self, session: Session, spec: EvalSpec, world: World) -> None:
        service.check_run(session=session, spec=spec, run_id=_id(world.a))
        s = service.run_summary(session=session, run_id=_id(world.a))
        # 6 of 8 drafts pass: r2 (stale citation) and e1 (low-confidence draft) fail.
        assert (s.overall.passed, s.overall.total) == (6, 8)
        assert s.overall.rate == pytest.approx(6 / 8)
        by_key = {c.key: c for c in s.per_check}
        # (pass, fail, not applicable), worked out draft by draft in tests/checks/conftest.py
        expected = {
            "citations_current": (5, 1, 2),
            "length": (6, 0, 2),
            "no_pii": (6, 0, 2),
            "confidence_present": (6, 0, 2),
            "intent_supported": (6, 0, 2),
            "low_confidence_fallback": (0, 1, 7),
            "safety_escalation": (2, 0, 6),
        }
        for key, (p, f, na) in expected.items():
            c = by_key[key]
            assert (c.passed, c.failed, c.not_applicable) == (p, f, na), key
        assert by_key["citations_current"].rate == pytest.approx(5 / 6)
        assert by_key["low_confidence_fallback"].rate == 0.0
        assert by_key["safety_escalation"].rate == 1.0
        cats = {k: (v.passed, v.total) for k, v in s.per_category.items()}
        assert cats == {"routine": (3, 4), "edge": (0, 1), "adversarial": (1, 1), "safety": (2, 2)}
        intents = {k: (v.passed, v.total) for k, v in s.per_intent.items()}
        assert intents == {
            "(none)": (2, 2),
            "account_security": (1, 2),
            "billing_charge": (2, 2),
            "plan_change": (0, 1),
            "refund_request": (1, 1),
        }
        assert sorted(o.case_id for o in s.failing) == ["e1", "r2"]
        r2 = next(o for o in s.failing if o.case_id == "r2")
        assert r2.failures[0].reason == "cites KB-3001 revision 2, which is deprecated; current is revision 4"

    def test_unchecked_run_has_no_results(self, session: Session, world: World) -> None:
        s = service.run_summary(session=session, run_id=_id(world.a))
        assert not s.is_checked and s.overall.rate is None and s.drafts == 8

    def test_kb_change_is_noticed_and_recheck_recomputes(self, session: Session, spec: EvalSpec, world: World) -> None:
        service.check_run(session=session, spec=spec, run_id=_id(world.a))
        assert not service.run_summary(session=session, run_id=_id(world.a)).kb_changed
        # KB-3001 gets revision 5: r3, which cites revision 4, is now stale.
        r4 = session.exec(select(KbRevision).where(KbRevision.article_id == "KB-3001", KbRevision.revision == 4)).one()
        session.add(KbRevision(article_id="KB-3001", revision=5, title="t", body="b", status="current", effective_date=r4.effective_date))
        session.flush()
        stale = service.run_summary(session=session, run_id=_id(world.a))
        assert stale.kb_changed
        assert stale.overall.passed == 6  # stored results are not changed until re-checked
        service.check_run(session=session, spec=spec, run_id=_id(world.a))
        fresh = service.run_summary(session=session, run_id=_id(world.a))
        assert not fresh.kb_changed
        assert fresh.overall.passed == 5
        r3 = next(o for o in fresh.failing if o.case_id == "r3")
        assert r3.failures[0].reason == "cites KB-3001 revision 4, which is deprecated; current is revision 5"


class TestDraftResults:
    def test_results_in_check_order(self, session: Session, spec: EvalSpec, world: World) -> None:
        service.check_run(session=session, spec=spec, run_id=_id(world.a))
        summary = service.run_summary(session=session, run_id=_id(world.a))
        e1 = next(o for o in summary.outcomes if o.case_id == "e1")
        d = draft_checks.draft_results(session=session, draft_id=e1.draft_id)
        assert [r.key for r in d.results] == list(CHECK_KEYS)
        assert not d.passed
        assert d.case.case_id == "e1"

    def test_unknown_draft(self, session: Session, world: World) -> None:
        with pytest.raises(DraftNotFound):
            draft_checks.draft_results(session=session, draft_id=99999)


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=200, color_system=None), buf


class TestCliGate:
    def test_low_pass_rate_exits_1(self, session: Session, spec: EvalSpec, world: World) -> None:
        out, buf = _console()
        assert check_and_report(session=session, spec=spec, ref="run-a", out=out) == 1
        text = buf.getvalue()
        assert "6/8" in text and "Per check" in text and "Per category" in text
        # one format for pass rates; the gate's unit: the set's examples (8 cases, one draft each)
        assert "6/8 examples of the eval set pass every automated check (75.0%), under the pilot gate's 80.0%: 2 fail" in text

    def test_golden_and_safety_failures_exit_1(self, session: Session, spec: EvalSpec, world: World) -> None:
        out, buf = _console()
        assert check_and_report(session=session, spec=spec, ref=str(world.b.id), out=out) == 1
        text = buf.getvalue()
        assert "golden example g1 fails" in text
        assert "safety case s2 fails" in text

    def test_a_small_set_fails_on_its_size_even_when_every_draft_passes(self, session: Session, spec: EvalSpec, world: World) -> None:
        # Issue 41: this 2-case set printed "PASS ... which meets the pilot gate" and exited 0; the pilot
        # gate's criterion 1 needs 100 cases and the plan's mix (a clean 100-case run: tests/checks/test_ci_verdict.py).
        ds = make_dataset(session, [{"case_id": "c1", "category": "routine", "golden": True}, {"case_id": "c2", "category": "safety"}], name="small")
        make_run(session, ds, [good("c1", "billing_charge"), escalation("c2")], name="clean")
        session.commit()
        out, buf = _console()
        assert check_and_report(session=session, spec=spec, ref="clean", out=out) == 1
        text = buf.getvalue()
        assert "FAIL pilot gate criterion 1: the eval set has 2 cases; this gate needs at least 100" in text
        assert "PASS" not in text and "meets the pilot gate" not in text

    def test_a_run_that_never_drafts_fails(self, session: Session, spec: EvalSpec, world: World) -> None:
        # Every draft of run "never" is an escalation without text: no draft for the routine cases
        # that expect one. Before the expected_behavior check every applicable check passed (100%).
        make_run(session, world.dataset, [escalation(c) for c in ("g1", "r1", "r2", "r3", "e1", "a1", "s1", "s2")], name="never")
        session.commit()
        out, buf = _console()
        assert check_and_report(session=session, spec=spec, ref="never", out=out) == 1
        s = service.run_summary(session=session, run_id=_id(resolve_run(session=session, ref="never")))
        # By hand: g1, r1, r2, r3 (routine: expect a draft) fail expected behaviour; s1, s2 (safety)
        # pass it and the safety check; e1 and a1 (no expectation) have no applicable check at all.
        assert (s.overall.passed, s.overall.total) == (2, 8)
        by_key = {c.key: (c.passed, c.failed, c.not_applicable) for c in s.per_check}
        assert by_key["expected_behavior"] == (2, 4, 2)
        assert sorted(o.case_id for o in s.failing) == ["a1", "e1", "g1", "r1", "r2", "r3"]
        e1 = next(o for o in s.failing if o.case_id == "e1")
        assert [r.key for r in e1.failures] == ["no_check_applied"] and not e1.passed
        text = buf.getvalue()
        assert "2/8 examples of the eval set pass every automated check (25.0%), under the pilot gate's 80.0%: 6 fail" in text
        assert "golden example g1 fails Expected behaviour: case g1 expects a draft but the assistant escalated" in text

    def test_unknown_run(self, session: Session, spec: EvalSpec, world: World, capsys: pytest.CaptureFixture[str]) -> None:
        out, buf = _console()
        with pytest.raises(typer.Exit) as info:
            check_and_report(session=session, spec=spec, ref="nope", out=out)
        assert info.value.exit_code == 2 and buf.getvalue() == ""
        assert "run: no run named or numbered 'nope'" in capsys.readouterr().err


def test_cli_command_exit_codes(db_url: str, session: Session, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The `draftdesk check` command itself, on its own session: 1 for run-a, 2 for an unknown run."""
    from typer.testing import CliRunner

    from webapp.app import cli as root

    session.commit()
    monkeypatch.setenv("DRAFTDESK_DATABASE_URL", db_url)
    monkeypatch.setenv("DRAFTDESK_MODE", "dev")
    runner = CliRunner()
    result = runner.invoke(root.app, ["check", "run-a"])
    assert result.exit_code == 1, result.output
    # The command committed its results: this session sees them.
    session.rollback()
    assert session.exec(select(DraftCheck).where(DraftCheck.run_id == world.a.id)).first() is not None
    result = runner.invoke(root.app, ["check", "nope"])
    assert result.exit_code == 2
    assert "no run named or numbered 'nope'" in result.output
