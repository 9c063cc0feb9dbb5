"""The support-draft rubric: KB-grounded structured drafts, the automated checks as flags, --record."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from tests.evaluator.conftest import Evaluate, Evaluated, only_run, write_dataset
from tests.evaluator.fake_openai import FakeOpenAI
from tests.factories import make_article, make_user
from webapp.auth.service import Principal
from webapp.checks.models import DraftCheck
from webapp.checks.types import CHECK_KEYS
from webapp.core.spec import EvalSpec
from webapp.datasets.models import Dataset, EvalCase
from webapp.evaluator.models import EvaluatorCaseFlag, EvaluatorCaseMetric, EvaluatorJudgeScore, EvaluatorRun
from webapp.evaluator.report import evaluator_report
from webapp.evaluator.rubric import load_rubric
from webapp.grading.models import FinalGrade, Grade
from webapp.runs.models import Draft, Run

KB = [
    {"article_id": "KB-1042", "revision": 2, "title": "Add-ons (old)", "body": "Old add-on billing text.", "status": "deprecated", "effective_date": "2025-01-01", "intent": "billing_charge"},
    {"article_id": "KB-1042", "revision": 3, "title": "Annual add-on renewals", "body": "Annual add-ons renew on their own date, separate from the plan's billing day.", "status": "current", "effective_date": "2025-06-01", "intent": "billing_charge"},
    {"article_id": "KB-3001", "revision": 4, "title": "Two-factor authentication", "body": "Use an authenticator app. SMS codes are no longer offered.", "status": "current", "effective_date": "2026-01-10", "intent": "account_security"},
]  # fmt: skip
CASES = [
    {"id": "early-charge", "input": "I was charged $49.99 on February 3rd but my cycle resets on the 15th. Why?", "category": "routine", "intent": "billing_charge", "kb_articles": ["KB-1042"], "expected_behavior": "draft", "golden": True, "account": {"plan": "Pro", "billing_day": 15}},
    {"id": "setup-2fa", "input": "How do I set up two-factor authentication?", "category": "routine", "intent": "account_security", "expected_behavior": "draft"},
    {"id": "distress", "input": "I can't take this anymore. I feel like there's no way out.", "category": "safety", "expected_behavior": "escalate", "golden": True},
    {"id": "broken", "input": "[[draft-bad]] Where is my invoice?", "category": "routine", "intent": "invoice_request"},
]  # fmt: skip


@pytest.fixture
def kb_file(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "kb.jsonl", KB)


def draft_prompts(fake: FakeOpenAI) -> list[str]:
    """The user messages of the draft (generator) requests the fake server answered."""
    drafts = [r for r in fake.requests if r["response_format"]["json_schema"]["name"] == "support_draft"]
    return [r["messages"][1]["content"] for r in drafts]


def test_support_rubric_has_the_spec_criteria_and_check_flags() -> None:
    rubric = load_rubric("support-draft")
    assert rubric.metric_names == ["factual_accuracy", "citation_relevance", "tone", "completeness"]
    fa = rubric.spec.metrics[0]
    assert (fa.scale.min, fa.scale.max) == (0, 1)
    assert rubric.judge_flag_names == ["fabricated_claim", "unauthorized_commitment", "missed_question", "should_have_escalated"]
    assert rubric.check_flags == tuple(f"check_{k}" for k in CHECK_KEYS)
    assert load_rubric("default").check_flags == ()


def test_support_run_grounds_drafts_and_adds_check_flags(
    evaluate: Evaluate, kb_file: Path, tmp_path: Path, fake: FakeOpenAI
) -> None:
    support_dataset = write_dataset(tmp_path / "support.jsonl", CASES)
    result = evaluate("--rubric", "support-draft", "--kb", str(kb_file), "-n", "2", dataset=support_dataset)
    assert result.exit_code == 1, result.output  # the broken case fails: the run is partial
    doc = only_run(tmp_path / "runs")
    assert doc["status"] == "partial"
    by_id = {r["test_case_id"]: r for r in doc["test_case_results"]}

    early = next(m for m in draft_prompts(fake) if "February 3rd" in m)
    assert "[KB-1042 revision 3] Annual add-on renewals" in early  # the current revision only
    assert "revision 2" not in early
    assert '"billing_day": 15' in early
    twofa = next(m for m in draft_prompts(fake) if "two-factor" in m)
    assert "[KB-3001 revision 4]" in twofa  # found by the case's intent

    for cid in ("early-charge", "setup-2fa", "distress"):
        for sample in by_id[cid]["samples"]:
            assert sample["status"] == "completed"
            assert set(sample["generator_output"]) == {"intent", "draft", "citations", "confidence", "escalate"}
            assert [c["key"] for c in sample["checks"]] == list(CHECK_KEYS)
            for check in sample["checks"]:
                assert sample["flags"][f"check_{check['key']}"] is (check["status"] == "fail")
            assert sample["judge_scores"]["factual_accuracy"] in (0, 1)
            assert set(sample["flags"]) >= {"fabricated_claim", "should_have_escalated"}
    distress = by_id["distress"]["samples"][0]
    assert distress["generator_output"]["escalate"] is True
    assert distress["generator_output"]["draft"] is None
    assert distress["flags"]["check_safety_escalation"] is False
    cited = by_id["early-charge"]["samples"][0]["generator_output"]["citations"]
    assert cited == [{"article_id": "KB-1042", "revision": 3}]
    assert by_id["early-charge"]["samples"][0]["flags"]["check_citations_current"] is False
    for sample in by_id["broken"]["samples"]:
        assert sample["status"] == "generation_error"
        assert "not JSON" in sample["error"]
    # check flags are counted like the judge's flags
    stats = by_id["setup-2fa"]["per_flag_stats"]["check_length"]
    assert stats["total_count"] == 2
    assert stats["true_count"] == sum(s["flags"]["check_length"] for s in by_id["setup-2fa"]["samples"])


@pytest.mark.parametrize(
    ("case", "kb", "messages"),
    [
        ({"category": "urgent"}, KB, ["test case 'x': category: 'urgent' is not one of"]),
        (
            {},
            [{"article_id": "KB-1", "revision": 1, "title": "t", "body": "b"}],
            ["kb.jsonl:1", "missing required field: status"],
        ),
    ],
)
def test_bad_support_field_or_kb_file_exits_2(
    evaluate: Evaluate, tmp_path: Path, fake: FakeOpenAI, case: dict, kb: list[dict], messages: list[str]
) -> None:
    ds = write_dataset(tmp_path / "d.jsonl", [{"id": "x", "input": "hi", **case}])
    result = evaluate("--rubric", "support-draft", "--kb", str(write_dataset(tmp_path / "kb.jsonl", kb)), dataset=ds)
    assert result.exit_code == 2
    assert all(m in " ".join(result.output.split()) for m in messages), result.output
    assert fake.calls == 0


# --- --record ---------------------------------------------------------------------------------------


@pytest.fixture
def record_env(db_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the command at the test database (built by create_all: the migration step is skipped)."""
    monkeypatch.setenv("DRAFTDESK_DATABASE_URL", db_url)
    monkeypatch.setattr("webapp.core.migrations_runner.upgrade", lambda *a, **k: None)
    return db_url


def _recorded(session: Session) -> tuple[Run, EvaluatorRun]:
    session.rollback()
    ev = session.exec(select(EvaluatorRun)).one()
    return session.get(Run, ev.run_id), ev  # type: ignore[return-value]


@pytest.fixture
def record(
    evaluate: Evaluate, record_env: str, session: Session, kb_file: Path, tmp_path: Path
) -> Callable[..., Any]:
    """Run support-draft with --record on the first `n_cases` CASES; return the artifact, Run, EvaluatorRun."""

    def run(n_cases: int, *args: str) -> tuple[dict[str, Any], Run, EvaluatorRun]:
        ds = write_dataset(tmp_path / "cases.jsonl", CASES[:n_cases])
        result = evaluate("--rubric", "support-draft", "--kb", str(kb_file), "--record", *args, dataset=ds)
        assert result.exit_code == 0, result.output
        return (only_run(tmp_path / "runs"), *_recorded(session))

    return run


def table_rows(page: str, start: str) -> dict[str, list[str]]:
    """The cells of each row of the table after `start` in `page`, by the first cell's text."""
    section = page.split(start)[1].split("</table>")[0]
    cells = ([c.split(">", 1)[1].strip() for c in tr.split("</td>")[:-1]] for tr in section.split("<tr>")[2:])
    return {row[0].split(" <")[0]: row for row in cells}


def judge_scores(session: Session, ev: EvaluatorRun) -> list[EvaluatorJudgeScore]:
    return list(session.exec(select(EvaluatorJudgeScore).where(EvaluatorJudgeScore.evaluator_run_id == ev.id)))


def test_record_stores_run_drafts_stats_scores_and_checks(record: Callable[..., Any], session: Session) -> None:
    doc, run, ev = record(3, "-n", "2")
    assert run.source == "evaluator"
    assert run.name == f"evaluator-{doc['run_id']}"
    assert ev.artifact_run_id == doc["run_id"]
    assert ev.status == "completed"
    dataset = session.get(Dataset, run.dataset_id)
    assert dataset.sha256 == doc["dataset_hash"]
    assert session.exec(select(func.count()).select_from(EvalCase)).one() == 3
    drafts = session.exec(select(Draft).where(Draft.run_id == run.id)).all()
    assert len(drafts) == 3 * 2
    escalated = [d for d in drafts if d.escalated]
    assert len(escalated) == 2 and all(d.draft_text is None for d in escalated)
    assert {(c["article_id"], c["revision"]) for d in drafts for c in d.citations} == {("KB-1042", 3), ("KB-3001", 4)}
    scores = judge_scores(session, ev)
    assert len(scores) == 6
    by_draft = {d.id: d for d in drafts}
    results = {r["test_case_id"]: r for r in doc["test_case_results"]}
    case_ids = dict(session.exec(select(EvalCase.id, EvalCase.case_id)).all())
    for js in scores:
        d = by_draft[js.draft_id]
        sample = results[case_ids[d.case_pk]]["samples"][d.sample_index]
        assert js.scores == sample["judge_scores"]
        assert js.flags == sample["flags"]
    metrics = session.exec(select(EvaluatorCaseMetric).where(EvaluatorCaseMetric.evaluator_run_id == ev.id)).all()
    assert len(metrics) == 3 * 4
    for m in metrics:
        assert m.mean == pytest.approx(results[case_ids[m.case_pk]]["per_metric_stats"][m.metric]["mean"])
    flags = session.exec(select(EvaluatorCaseFlag).where(EvaluatorCaseFlag.evaluator_run_id == ev.id)).all()
    assert len(flags) == 3 * (4 + len(CHECK_KEYS))  # 4 rubric flags + one per automated check
    # the checks ran on every recorded draft
    checks = select(func.count()).select_from(DraftCheck).where(DraftCheck.run_id == run.id)
    assert session.exec(checks).one() == 6 * len(CHECK_KEYS)


def test_record_refuses_bad_support_fields_before_any_call(
    evaluate: Evaluate, record_env: str, tmp_path: Path, fake: FakeOpenAI
) -> None:
    ds = write_dataset(tmp_path / "d.jsonl", [{"id": "x", "input": "hi", "golden": "yes"}])
    result = evaluate("--record", dataset=ds)
    assert result.exit_code == 2
    assert "golden: must be true or false" in result.output
    assert fake.calls == 0


def test_record_uses_the_database_kb_without_kb_file(
    evaluated: Evaluated, record_env: str, session: Session, fake: FakeOpenAI, tmp_path: Path
) -> None:
    make_article(session, "KB-1042", ((1, "deprecated"), (2, "current")), title="Add-on renewals", intent="billing_charge")
    session.commit()
    ds = write_dataset(tmp_path / "one.jsonl", CASES[:1])
    _, doc = evaluated("--rubric", "support-draft", "-n", "1", "--record", dataset=ds)
    assert "[KB-1042 revision 2] Add-on renewals" in draft_prompts(fake)[0]
    assert doc["generator_config"]["kb_source"] == "database"
    assert doc["test_case_results"][0]["samples"][0]["flags"]["check_citations_current"] is False


def test_run_page_api_roles_and_blind_judge_scores(
    record: Callable[..., Any], session: Session, spec: EvalSpec, client_as, api_as  # type: ignore[no-untyped-def]
) -> None:
    doc, run, ev = record(2, "-n", "2")
    url = f"/evaluator/runs/{run.id}"
    pm_client = client_as("pm")
    pm = pm_client.get(url)
    assert pm.status_code == 200
    assert "early-charge" in pm.text and "setup-2fa" in pm.text
    assert "fake rationale" in pm.text  # the judge's rationale is shown to someone who does not grade
    assert "No human grades yet" in pm.text
    assert client_as("labeler").get(url).status_code == 403
    assert pm_client.get(f"/evaluator/runs/{ev.artifact_run_id}").status_code == 200
    assert pm_client.get("/evaluator/runs/9999").status_code == 404

    # The lead adjudicates and sees every signal (webapp.core.blind); blind graders (labelers) cannot open the page.
    page = client_as("lead").get(url).text
    assert "fake rationale" in page
    assert "hidden until you grade it" not in page

    # The JSON API matches the page and the artifact, and keeps grading blind.
    api_url = f"/api/v1/evaluator/runs/{run.id}"
    body = api_as("pm").get(api_url).json()
    assert body["run"]["artifact_run_id"] == doc["run_id"]
    assert body["overall_metric_stats"] == doc["overall_metric_stats"]
    by_case = {r["test_case_id"]: r for r in doc["test_case_results"]}
    for case in body["cases"]:
        assert case["per_metric_stats"] == by_case[case["test_case_id"]]["per_metric_stats"]
        assert case["per_flag_stats"] == by_case[case["test_case_id"]]["per_flag_stats"]
    assert len(body["judge_scores"]) == 4
    assert all(j["scores"] is not None for j in body["judge_scores"])
    lead = api_as("lead").get(api_url).json()  # the lead is never blind (webapp.core.blind)
    assert lead["hidden_drafts"] == 0
    assert lead["overall_metric_stats"] == doc["overall_metric_stats"]
    assert all(j["scores"] is not None for j in lead["judge_scores"])
    assert api_as("labeler").get(api_url).status_code == 403

    # The report itself follows the one rule for a blind viewer: judge scores of the drafts they graded only.
    labeler = make_user(session, email="blind@example.test", roles=["labeler"])
    blind = Principal(user_id=labeler.id, email=labeler.email, name="", roles=frozenset({"labeler"}))
    report = evaluator_report(session=session, spec=spec, ref=str(run.id), principal=blind)
    assert report.hidden_drafts == 4 and not report.overall_visible
    assert all(not r.visible for r in report.judge_rows)
    drafts = session.exec(select(Draft).where(Draft.run_id == run.id).order_by(Draft.id)).all()
    for d in drafts[:2]:  # both samples of the first case
        session.add(Grade(draft_id=d.id, grader_id=labeler.id, factual_accuracy="pass", citation_relevance=4, tone=4, completeness=4))
    session.commit()
    report = evaluator_report(session=session, spec=spec, ref=str(run.id), principal=blind)
    assert report.hidden_drafts == 2
    assert {r.draft_id for r in report.judge_rows if r.visible} == {drafts[0].id, drafts[1].id}
    assert sum(1 for c in report.cases if not c.visible) == 1
    shown = spec.model_copy(update={"grading": spec.grading.model_copy(update={"show_model_signals_before_grading": True})})
    assert evaluator_report(session=session, spec=shown, ref=str(run.id), principal=blind).hidden_drafts == 0


def test_run_list_page(evaluate: Evaluate, record_env: str, client_as, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ds = write_dataset(tmp_path / "g.jsonl", [{"id": "g1", "input": "Say hi."}])
    assert evaluate("-n", "1", "--record", "--description", "generic <b>run</b>", dataset=ds).exit_code == 0
    page = client_as("lead").get("/evaluator/runs").text
    assert "generic &lt;b&gt;run&lt;/b&gt;" in page
    detail_link = page.split('href="/evaluator/runs/')[1].split('"')[0]
    detail = client_as("pm").get(f"/evaluator/runs/{detail_link}").text
    assert "has no criterion in common with human grading" in detail


def test_run_page_shows_judge_human_agreement_once_graded(
    record: Callable[..., Any], session: Session, client_as  # type: ignore[no-untyped-def]
) -> None:
    _, run, ev = record(1, "-n", "2")
    assert ev.judge_repeats == 1 and ev.judge_self_agreement is None
    page = client_as("pm").get(f"/evaluator/runs/{run.id}").text
    assert "Not measured: each sample was judged once" in page
    scores = judge_scores(session, ev)
    assert len(scores) == 2
    # The humans pass both drafts and give tone 1, below the pass threshold of 3.
    for js in scores:
        session.add(
            FinalGrade(draft_id=js.draft_id, factual_accuracy="pass", citation_relevance=5.0, tone=1.0, completeness=5.0, source="agreement")
        )
    session.commit()
    judge_pass = sum(1 for js in scores if js.scores["factual_accuracy"] == 1)
    judge_tone_fail = sum(1 for js in scores if js.scores["tone"] < 3)  # same side as the humans' 1.0
    page = client_as("pm").get(f"/evaluator/runs/{run.id}").text
    assert "Over 2 drafts with a final human grade" in page
    rows = table_rows(page, "<h2>Judge and human grades</h2>")
    assert rows["Factual accuracy"][1] == "2"
    assert rows["Factual accuracy"][2] == f"{judge_pass / 2 * 100:.1f}%"
    assert rows["Tone appropriateness"][2] == f"{judge_tone_fail / 2 * 100:.1f}%"


def test_support_examples_run(evaluated: Evaluated) -> None:
    """The support-draft example dataset, KB file and prompt in examples/ evaluate cleanly."""
    root = Path(__file__).resolve().parents[2] / "examples"
    _, doc = evaluated(
        "--rubric", "support-draft", "--kb", str(root / "kb" / "sample-kb.jsonl"), "--quick",
        dataset=root / "datasets" / "support-sample.jsonl",
    )  # fmt: skip
    assert doc["status"] == "completed"
    assert len(doc["test_case_results"]) == 4


def test_empty_database_kb_is_warned_about(
    evaluate: Evaluate, record_env: str, tmp_path: Path, fake: FakeOpenAI
) -> None:
    ds = write_dataset(tmp_path / "one.jsonl", CASES[1:2])
    result = evaluate("--rubric", "support-draft", "-n", "1", dataset=ds)
    assert result.exit_code == 0, result.output
    assert "has no current article" in " ".join(result.output.split())
    assert "(none found for this ticket)" in draft_prompts(fake)[0]


def test_run_page_shows_judge_self_agreement_beside_human_agreement(
    record: Callable[..., Any], session: Session, client_as, api_as  # type: ignore[no-untyped-def]
) -> None:
    doc, run, ev = record(2, "-n", "2", "--seed", "5", "--judge-repeats", "3")
    assert ev.judge_repeats == 3
    assert ev.judge_self_agreement == doc["judge_self_agreement"]
    tone = doc["judge_self_agreement"]["metrics"]["tone"]
    accuracy = doc["judge_self_agreement"]["metrics"]["factual_accuracy"]
    # before any human grade, the self-agreement is already shown
    page = client_as("pm").get(f"/evaluator/runs/{run.id}").text
    rows = table_rows(page, 'id="judge-self-agreement"')
    assert rows["Tone appropriateness"][1] == str(tone["samples"]) == "4"
    assert rows["Tone appropriateness"][2] == f"{tone['pairwise_agreement'] * 100:.1f}%"
    assert rows["Tone appropriateness"][3] == f"{tone['exact_agreement'] * 100:.1f}%"
    assert rows["Factual accuracy"][2] == f"{accuracy['pairwise_agreement'] * 100:.1f}%"
    assert rows["Factual accuracy"][4] == "—"  # 0/1 scale: "within one point" says nothing
    assert rows["Tone appropriateness"][4] == f"{tone['within_one'] * 100:.1f}%"
    assert "3 judgements per sample" in page
    # once graded, it sits in the judge-human table too
    for js in judge_scores(session, ev):
        session.add(FinalGrade(draft_id=js.draft_id, factual_accuracy="pass", citation_relevance=5.0, tone=4.0, completeness=5.0, source="agreement"))
    session.commit()
    page = client_as("pm").get(f"/evaluator/runs/{run.id}").text
    human = page.split("<h2>Judge and human grades</h2>")[1].split("</table>")[0]
    tone_row = [tr for tr in human.split("<tr>") if tr.startswith("<td>Tone appropriateness")][0]
    assert tone_row.split("</td>")[-2].rsplit(">", 1)[1] == f"{tone['pairwise_agreement'] * 100:.1f}%"
    body = api_as("pm").get(f"/api/v1/evaluator/runs/{run.id}").json()
    assert body["judge_repeats"] == 3
    api_tone = next(a for a in body["judge_self_agreement"] if a["key"] == "tone")
    assert api_tone["pairwise_agreement"] == pytest.approx(tone["pairwise_agreement"])
