"""Drafts import and run queries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import Session

from tests.conftest import SPEC_PATH
from tests.datasets.helpers import count_rows, invoke, write_jsonl
from tests.factories import make_dataset, make_run, make_user
from webapp.auth.service import get_user_by_email
from webapp.core.spec import load_spec
from webapp.datasets.models import Dataset
from webapp.datasets.records import RecordError
from webapp.grading.grades import record_grade
from webapp.grading.scores import validate_scores
from webapp.runs import hooks as runs_hooks
from webapp.runs import service
from webapp.runs.models import Draft, Run
from webapp.runs.schemas import DraftPublic


def draft(case_id: str, **extra: object) -> dict:
    return {
        "case_id": case_id, "draft_text": "Hello, here is how it works.", "intent": "billing_charge",
        "citations": [{"article_id": "KB-1042", "revision": 1}], "confidence": 0.85, "escalated": False,
        "latency_ms": 1200, "cost_usd": 0.012, **extra,
    }


def data(records: list) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records).encode()


@pytest.fixture
def dataset(session: Session) -> Dataset:
    ds = make_dataset(session, [{"case_id": f"c{i}", "category": "routine" if i % 2 else "edge"} for i in range(1, 601)], name="eval")
    session.commit()
    return ds


class TestImportDrafts:
    def test_creates_run_and_drafts(self, session: Session, dataset: Dataset) -> None:
        records = [draft("c1"), draft("c2", draft_text=None, escalated=True, citations=[], confidence=None)]
        records += [draft("c1", sample_index=1), draft("c3", raw_output={"choices": [1]})]
        result = runs_hooks.import_drafts(
            session=session, data=data(records), path="d.jsonl", run_name="r1", dataset="eval", model="m", prompt_version="v3"
        )
        session.commit()
        assert result.run_created and (result.created, result.updated, result.unchanged) == (4, 0, 0)
        run = service.resolve_run(session=session, ref="r1")
        assert (run.model, run.prompt_version, run.dataset_id) == ("m", "v3", dataset.id)
        rows = service.list_drafts(session=session, run_id=run.id)
        samples = [(r.case.case_id, r.draft.sample_index) for r in rows]
        assert samples == [("c1", 0), ("c1", 1), ("c2", 0), ("c3", 0)]
        d = rows[0].draft
        assert d.citations == [{"article_id": "KB-1042", "revision": 1}]
        assert (d.confidence, d.intent, d.escalated, d.latency_ms, d.cost_usd) == (0.85, "billing_charge", False, 1200, 0.012)
        assert d.raw_output["case_id"] == "c1"  # the whole record is kept as the raw output
        assert rows[2].draft.draft_text is None and rows[2].draft.escalated
        assert rows[3].draft.raw_output == {"choices": [1]}  # a raw_output field is kept as given

    def test_reimport_is_idempotent_and_updates(self, session: Session, dataset: Dataset) -> None:
        records = [draft("c1"), draft("c3")]
        runs_hooks.import_drafts(session=session, data=data(records), path="d.jsonl", run_name="r1", dataset="eval")
        session.commit()
        again = runs_hooks.import_drafts(session=session, data=data(records), path="d.jsonl", run_name="r1")
        assert (again.run_created, again.created, again.updated, again.unchanged) == (False, 0, 0, 2)
        records[1]["confidence"] = 0.5
        changed = runs_hooks.import_drafts(session=session, data=data(records), path="d.jsonl", run_name="r1")
        session.commit()
        assert (changed.created, changed.updated, changed.unchanged) == (0, 1, 1)
        assert count_rows(session, Draft) == 2 and count_rows(session, Run) == 1

    def test_dataset_option_needed_with_several_datasets(self, session: Session, dataset: Dataset) -> None:
        result = runs_hooks.import_drafts(session=session, data=data([draft("c1")]), path="d.jsonl", run_name="r")
        assert result.run.dataset_id == dataset.id
        make_dataset(session, [{"case_id": "x"}], name="other")
        with pytest.raises(RecordError, match="--dataset"):
            runs_hooks.import_drafts(session=session, data=data([draft("c1")]), path="d.jsonl", run_name="r2")

    def test_existing_run_over_another_dataset_is_refused(self, session: Session, dataset: Dataset) -> None:
        make_dataset(session, [{"case_id": "c1"}], name="other")
        runs_hooks.import_drafts(session=session, data=data([draft("c1")]), path="d.jsonl", run_name="r", dataset="eval")
        with pytest.raises(RecordError, match="is over dataset"):
            runs_hooks.import_drafts(session=session, data=data([draft("c1")]), path="d.jsonl", run_name="r", dataset="other")

    @pytest.mark.parametrize(
        ("record", "message"),
        [
            ({"draft_text": "x"}, "missing required field: case_id"),
            ({"case_id": "c1"}, "missing required field: draft_text"),
            (draft("c1", draft_text=3), "draft_text: must be a string or null"),
            (draft("c1", citations="KB-1"), "citations: must be a list"),
            (draft("c1", citations=[{"revision": 1}]), "citations[0]: must be an object"),
            (draft("c1", citations=[{"article_id": "KB-1", "revision": "two"}]), "citations[0].revision: must be a whole number"),
            (draft("c1", confidence="high"), "confidence: must be a number or null"),
            (draft("c1", escalated="no"), "escalated: must be true or false"),
            (draft("c1", latency_ms=-5), "latency_ms: must be a number"),
            (draft("c1", cost_usd="free"), "cost_usd: must be a number"),
            (draft("c1", sample_index=-1), "sample_index: must be a whole number"),
            ("[1, 2]", "must be a JSON object"),
        ],
    )
    def test_bad_record_names_line(self, session: Session, dataset: Dataset, record, message: str) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(RecordError) as info:
            runs_hooks.import_drafts(session=session, data=data([draft("c2"), record]), path="d.jsonl", run_name="r", dataset="eval")
        assert info.value.line == 2
        assert info.value.message.startswith("record 2: " + message)

    def test_unknown_case_and_duplicates(self, session: Session, dataset: Dataset) -> None:
        for second, message in (("nope", "'nope' is not a case"), ("c1", "appears twice")):
            pair = data([draft("c1"), draft(second)])
            with pytest.raises(RecordError) as info:
                runs_hooks.import_drafts(session=session, data=pair, path="d.jsonl", run_name="r", dataset="eval")
            assert info.value.line == 2 and message in info.value.message

    def test_bad_line_500_of_600_leaves_nothing(self, session: Session, dataset: Dataset) -> None:
        records = [draft(f"c{i}") for i in range(1, 601)]
        records[499] = draft("c500", confidence="0.9")
        with pytest.raises(RecordError) as info:
            runs_hooks.import_drafts(session=session, data=data(records), path="d.jsonl", run_name="r", dataset="eval")
        assert info.value.line == 500
        assert count_rows(session, Run) == 0 and count_rows(session, Draft) == 0


def _grade(session: Session, run_name: str, case_id: str, emails: list[str]) -> None:
    """Record one agreeing grade per email on the run's draft of the case (sample 0)."""
    spec = load_spec(SPEC_PATH)
    run = service.resolve_run(session=session, ref=run_name)
    (row,) = [r for r in service.list_drafts(session=session, run_id=run.id) if r.case.case_id == case_id]
    scores = validate_scores(
        spec=spec, data={"factual_accuracy": "pass", "citation_relevance": 4, "tone": 4, "completeness": 4}
    )
    for email in emails:
        user = get_user_by_email(session=session, email=email) or make_user(session, email=email, roles=["labeler"])
        record_grade(session=session, spec=spec, draft_id=row.draft.id, grader_id=user.id, scores=scores)


def _texts(session: Session, run_name: str) -> dict[str, str | None]:
    run = service.resolve_run(session=session, ref=run_name)
    return {r.case.case_id: r.draft.draft_text for r in service.list_drafts(session=session, run_id=run.id)}


class TestReimportOverGrades:
    """Issue 10, item 9: a re-import never changes what graders graded."""

    def test_changed_text_of_graded_drafts_is_refused_and_nothing_written(self, session: Session, dataset: Dataset) -> None:
        records = [draft("c1"), draft("c2"), draft("c3")]
        runs_hooks.import_drafts(session=session, data=data(records), path="d.jsonl", run_name="r1", dataset="eval", model="m1")
        _grade(session, "r1", "c1", ["a@example.test", "b@example.test"])
        _grade(session, "r1", "c2", ["a@example.test"])
        session.commit()
        before = _texts(session, "r1")
        changed = [draft("c1", draft_text="New text."), draft("c2", citations=[]), draft("c3", draft_text="Also new.")]
        with pytest.raises(RecordError) as info:
            runs_hooks.import_drafts(session=session, data=data(changed), path="d.jsonl", run_name="r1", model="m2")
        message = info.value.location
        assert message.startswith("d.jsonl:1: ")
        assert "c1 (line 1, 2 grades)" in message and "c2 (line 2, 1 grade)" in message and "c3 (" not in message
        session.rollback()
        assert _texts(session, "r1") == before
        assert service.resolve_run(session=session, ref="r1").model == "m1"
        # The same text with other fields changed (latency, confidence) is still imported.
        same_text = [draft("c1", confidence=0.4), draft("c2"), draft("c3", draft_text="Also new.")]
        result = runs_hooks.import_drafts(session=session, data=data(same_text), path="d.jsonl", run_name="r1")
        assert (result.created, result.updated, result.unchanged) == (0, 2, 1)
        assert _texts(session, "r1")["c3"] == "Also new."


class TestQueries:
    def test_list_runs_counts(self, session: Session) -> None:
        ds = make_dataset(session, [{"case_id": "a", "category": "routine"}, {"case_id": "b", "category": "safety"}, {"case_id": "c"}])
        ab = [{"case_id": "a", "draft_text": "x"}, {"case_id": "b", "draft_text": None, "escalated": True}]
        make_run(session, ds, [*ab, {"case_id": "c", "draft_text": None}], name="r1")
        make_run(session, ds, [], name="r2")
        summaries = {s.run.name: s for s in service.list_runs(session=session)}
        assert (summaries["r1"].drafts, summaries["r1"].escalated, summaries["r1"].fallbacks) == (3, 1, 1)
        assert summaries["r2"].drafts == 0
        run = service.resolve_run(session=session, ref="r1")
        assert [r.case.case_id for r in service.list_drafts(session=session, run_id=run.id, category="safety")] == ["b"]
        d, c, r = service.get_draft(session=session, draft_id=service.list_drafts(session=session, run_id=run.id)[0].draft.id)
        assert (c.case_id, r.name) == ("a", "r1")
        pub = DraftPublic.of_case(d, c).model_dump()
        assert pub["case_id"] == "a" and pub["id"] == d.id and pub["draft_text"] == "x"

    def test_intent_is_the_cases_and_draft_intent_the_drafts(self, session: Session) -> None:
        """`intent` filters on the dataset's label, `draft_intent` on what the assistant predicted."""
        labels = {"a": "billing_charge", "b": "login_2fa", "c": "billing_charge"}
        ds = make_dataset(session, [{"case_id": c, "intent": i} for c, i in labels.items()])
        # The assistant got case b wrong (it predicted billing_charge for a login case).
        drafts = [{"case_id": c, "draft_text": "x", "intent": "billing_charge"} for c in ("a", "b")]
        run = make_run(session, ds, [*drafts, {"case_id": "c", "draft_text": None, "intent": None}], name="r")

        def ids(**filters: str) -> list[str]:
            return [r.case.case_id for r in service.list_drafts(session=session, run_id=run.id, **filters)]

        assert ids(intent="billing_charge") == ["a", "c"]
        assert ids(draft_intent="billing_charge") == ["a", "b"]
        assert ids(intent="login_2fa", draft_intent="billing_charge") == ["b"]
        assert service.draft_intents(session=session, run_id=run.id) == ["billing_charge"]


class TestImportDraftsCli:
    def test_import_and_list(self, monkeypatch: pytest.MonkeyPatch, db_url: str, session: Session, dataset: Dataset, tmp_path: Path) -> None:
        path = write_jsonl(tmp_path / "d.jsonl", [draft("c1"), draft("c2")])
        r = invoke(monkeypatch, db_url, ["import", "drafts", str(path), "--run", "demo-x", "--dataset", "eval", "--model", "m1", "--prompt-version", "v9"])
        assert r.exit_code == 0, r.output
        assert "2 draft(s) created" in r.output
        out = invoke(monkeypatch, db_url, ["runs"])
        assert out.exit_code == 0 and out.output.startswith("demo-x\t")
        assert "m1" in out.output and "v9" in out.output

    def test_bad_line_500_of_600_via_cli(self, monkeypatch: pytest.MonkeyPatch, db_url: str, session: Session, dataset: Dataset, tmp_path: Path) -> None:
        records = [draft(f"c{i}") for i in range(1, 601)]
        records[499] = draft("c500", escalated="maybe")
        path = write_jsonl(tmp_path / "d.jsonl", records)
        r = invoke(monkeypatch, db_url, ["import", "drafts", str(path), "--run", "r", "--dataset", "eval"])
        assert r.exit_code == 2
        assert r.stderr.strip() == f"{path}:500: record 500: escalated: must be true or false, not 'maybe'"
        assert count_rows(session, Run) == 0 and count_rows(session, Draft) == 0

    def test_reimport_over_graded_drafts_exits_2_naming_cases(self, monkeypatch: pytest.MonkeyPatch, db_url: str, session: Session, dataset: Dataset, tmp_path: Path) -> None:
        path = write_jsonl(tmp_path / "d.jsonl", [draft("c1"), draft("c2")])
        assert invoke(monkeypatch, db_url, ["import", "drafts", str(path), "--run", "r", "--dataset", "eval"]).exit_code == 0
        session.expire_all()
        _grade(session, "r", "c2", ["a@example.test", "b@example.test"])
        session.commit()
        write_jsonl(path, [draft("c1", draft_text="Changed but ungraded."), draft("c2", draft_text="Changed and graded.")])
        r = invoke(monkeypatch, db_url, ["import", "drafts", str(path), "--run", "r"])
        assert r.exit_code == 2
        assert r.stderr.startswith(f"{path}:2: ") and "c2 (line 2, 2 grades)" in r.stderr and "c1 (" not in r.stderr
        assert r.stdout == ""
        session.expire_all()
        assert _texts(session, "r") == {"c1": "Hello, here is how it works.", "c2": "Hello, here is how it works."}


class TestDraftsFileFormat:
    def test_only_jsonl(self, session: Session, dataset: Dataset) -> None:
        with pytest.raises(RecordError) as info:
            runs_hooks.import_drafts(session=session, data=b"- case_id: c1\n", path="d.yaml", run_name="r", dataset="eval")
        assert str(info.value) == "Unsupported drafts file format: .yaml. Supported formats: .jsonl"

    def test_run_summary_of_one_run(self, session: Session, dataset: Dataset) -> None:
        runs_hooks.import_drafts(session=session, data=data([draft("c1"), draft("c2", draft_text=None)]), path="a.jsonl", run_name="a", dataset="eval")
        runs_hooks.import_drafts(session=session, data=data([draft("c1")]), path="b.jsonl", run_name="b", dataset="eval")
        s = service.run_row(session=session, run=service.resolve_run(session=session, ref="a"))
        assert (s.run.name, s.drafts, s.fallbacks, s.dataset.name) == ("a", 2, 1, "eval")
