"""Dataset import: versions, no-op on an identical file, typed support fields, all-or-nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import Session, select

from tests.datasets.helpers import count_rows, invoke, write_jsonl
from webapp.datasets import service
from webapp.datasets.loader import DatasetError, sha256_of
from webapp.datasets.models import Dataset, EvalCase


def case(i: int, **extra: object) -> dict:
    return {"id": f"case-{i:03d}", "input": f"Customer message {i}", **extra}


class TestImportDataset:
    def test_imports_cases_with_typed_fields(self, session: Session, tmp_path: Path) -> None:
        rec = case(
            1, reference="Ref", category="edge", intent="plan_change", account={"plan": "Enterprise"},
            conversation=[{"role": "customer", "text": "hi"}], kb_articles=["KB-2011"], golden=True,
            expected_behavior="draft", difficulty="hard",
        )
        path = write_jsonl(tmp_path / "eval.jsonl", [rec, case(2)])
        result = service.import_dataset_file(session=session, path=path)
        session.commit()
        assert result.created and result.dataset.name == "eval" and result.dataset.version == 1
        assert result.dataset.sha256 == sha256_of(path.read_bytes())
        assert result.dataset.count == 2 and result.dataset.format == ".jsonl"
        c1, c2 = service.list_cases(session=session, dataset_id=result.dataset.id)
        assert (c1.case_id, c1.category, c1.intent, c1.golden, c1.expected_behavior) == ("case-001", "edge", "plan_change", True, "draft")
        assert c1.account == {"plan": "Enterprise"} and c1.kb_articles == ["KB-2011"]
        assert c1.conversation == [{"role": "customer", "text": "hi"}] and c1.reference == "Ref"
        # Every field beyond the guide's own stays in the metadata dict as well.
        assert c1.extra["difficulty"] == "hard" and c1.extra["category"] == "edge"
        assert c2.category is None and c2.golden is False and c2.extra == {}

    def test_identical_file_is_a_noop_that_says_so(self, session: Session, tmp_path: Path) -> None:
        path = write_jsonl(tmp_path / "d.jsonl", [case(1)])
        first = service.import_dataset_file(session=session, path=path, name="support")
        again = service.import_dataset_file(session=session, path=path, name="support")
        assert first.created and not again.created and again.dataset.id == first.dataset.id
        assert "nothing imported" in again.message
        session.commit()  # and after a commit too
        assert not service.import_dataset_file(session=session, path=path, name="support").created
        session.commit()
        assert count_rows(session, Dataset) == 1 and count_rows(session, EvalCase) == 1

    def test_changed_file_is_a_new_version(self, session: Session, tmp_path: Path) -> None:
        path = write_jsonl(tmp_path / "d.jsonl", [case(1)])
        v1 = service.import_dataset_file(session=session, path=path, name="support").dataset
        write_jsonl(path, [case(1), case(2)])
        v2 = service.import_dataset_file(session=session, path=path, name="support").dataset
        session.commit()
        assert (v1.version, v2.version) == (1, 2) and v2.count == 2
        assert service.get_dataset(session=session, ref="support").id == v2.id
        assert service.get_dataset(session=session, ref=str(v1.id)).id == v1.id

    def test_yaml_dataset(self, session: Session, tmp_path: Path) -> None:
        path = tmp_path / "y.yaml"
        path.write_text("- id: a\n  input: b\n  category: safety\n  expected_behavior: escalate\n")
        ds = service.import_dataset_file(session=session, path=path).dataset
        (c,) = service.list_cases(session=session, dataset_id=ds.id)
        assert ds.format == ".yaml" and c.category == "safety" and c.expected_behavior == "escalate"

    def test_bad_support_field_names_file_and_line(self, session: Session, tmp_path: Path) -> None:
        path = write_jsonl(tmp_path / "d.jsonl", [case(1), case(2, category="weird")])
        with pytest.raises(DatasetError) as info:
            service.import_dataset_file(session=session, path=path)
        assert info.value.location == f"{path}:2: test case 'case-002': category: 'weird' is not one of routine, edge, adversarial, safety"

    def test_empty_file_is_refused(self, session: Session, tmp_path: Path) -> None:
        path = write_jsonl(tmp_path / "e.jsonl", [""])
        with pytest.raises(DatasetError, match="no test cases"):
            service.import_dataset_file(session=session, path=path)

    def test_bad_line_500_of_600_leaves_nothing(self, session: Session, tmp_path: Path) -> None:
        records = [case(i, category="routine") for i in range(1, 601)]
        records[499] = case(500, golden="sometimes")
        path = write_jsonl(tmp_path / "big.jsonl", records)
        with pytest.raises(DatasetError) as info:
            service.import_dataset_file(session=session, path=path)
        assert info.value.line == 500
        assert count_rows(session, Dataset) == 0 and count_rows(session, EvalCase) == 0


class TestListCases:
    def test_filters(self, session: Session, tmp_path: Path) -> None:
        recs = [
            case(1, category="routine", intent="billing_charge"),
            case(2, category="edge", intent="plan_change", golden=True),
            case(3, category="edge", intent="billing_charge"),
        ]
        ds = service.import_dataset_file(session=session, path=write_jsonl(tmp_path / "f.jsonl", recs)).dataset
        ids = lambda **kw: [c.case_id for c in service.list_cases(session=session, dataset_id=ds.id, filters=service.CaseFilter(**kw))]  # noqa: E731
        assert ids(category="edge") == ["case-002", "case-003"]
        assert ids(intent="billing_charge") == ["case-001", "case-003"]
        assert ids(golden="yes") == ["case-002"]
        assert ids(golden="no", category="edge") == ["case-003"]
        assert ids(q="message 3") == ["case-003"]
        assert service.case_facets(session=session, dataset_id=ds.id) == {
            "categories": ["edge", "routine"],
            "intents": ["billing_charge", "plan_change"],
        }
        assert service.category_counts(session=session, dataset_id=ds.id) == {"routine": 1, "edge": 2}


class TestImportDatasetCli:
    def test_import_then_noop_then_version(self, monkeypatch: pytest.MonkeyPatch, db_url: str, session: Session, tmp_path: Path) -> None:
        path = write_jsonl(tmp_path / "cli.jsonl", [case(1)])
        r1 = invoke(monkeypatch, db_url, ["import", "dataset", str(path), "--name", "n"])
        r2 = invoke(monkeypatch, db_url, ["import", "dataset", str(path), "--name", "n"])
        write_jsonl(path, [case(1), case(2)])
        r3 = invoke(monkeypatch, db_url, ["import", "dataset", str(path), "--name", "n"])
        assert (r1.exit_code, r2.exit_code, r3.exit_code) == (0, 0, 0), r1.output + r2.output + r3.output
        assert "version 1 imported" in r1.output and "already holds this file" in r2.output
        assert "version 2 imported" in r3.output
        versions = session.exec(select(Dataset.version).where(Dataset.name == "n").order_by(Dataset.version)).all()
        assert versions == [1, 2]

    @pytest.mark.parametrize(
        ("name", "lines", "message"),
        [
            ("b.jsonl", ['{"id": "t-1", "input": "First case"}', '{"id": "t-1", "input": "Duplicate ID!"}'],
             ":2: Duplicate test case ID 't-1' found at line 2"),
            ("b.jsonl", ['{"input": "No ID"}'], ":1: Record at line 1 is missing required field: id"),
            ("b.jsonl", ['{"id": "", "input": "Empty"}'],
             ":1: Invalid test case at index 0: id field validation failed"),
            ("d.csv", ["id,input"],
             ": Unsupported dataset file format: .csv. Supported formats: .jsonl, .yaml, .yml"),
        ],
    )
    def test_guide_errors_exit_2_with_file_line(
        self, monkeypatch: pytest.MonkeyPatch, db_url: str, session: Session, tmp_path: Path,
        name: str, lines: list[str], message: str,
    ) -> None:
        path = write_jsonl(tmp_path / name, lines)
        r = invoke(monkeypatch, db_url, ["import", "dataset", str(path)])
        assert r.exit_code == 2
        assert r.stderr.strip() == f"{path}{message}"
        assert count_rows(session, Dataset) == 0

    def test_bad_line_500_of_600_via_cli(self, monkeypatch: pytest.MonkeyPatch, db_url: str, session: Session, tmp_path: Path) -> None:
        lines = [json.dumps(case(i)) for i in range(1, 601)]
        lines[499] = '{"id": "case-500", "input": '
        path = write_jsonl(tmp_path / "big.jsonl", lines)
        r = invoke(monkeypatch, db_url, ["import", "dataset", str(path)])
        assert r.exit_code == 2 and r.stderr.startswith(f"{path}:500: Invalid JSON at line 500")
        assert count_rows(session, Dataset) == 0 and count_rows(session, EvalCase) == 0
