"""load_dataset against every example and error case of the dataset format guide."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from webapp.datasets.loader import DatasetError, SupportFieldError, TestCase, load_dataset, support_fields

GUIDE_JSONL = (
    '{"id": "test-001", "input": "Explain what Python is in simple terms.", "description": "Basic Python explanation", '
    '"task": "Explain programming language", "expected_constraints": "Keep it under 100 words, use simple language", '
    '"reference": "Python is a popular programming language known for its readability and ease of use.", '
    '"difficulty": "easy", "topic": "programming"}\n'
    '{"id": "test-002", "input": "Write a function to calculate factorial of a number.", "task": "Code generation", '
    '"expected_constraints": "Use recursion, include docstring", "custom_tag": "algorithms"}\n'
    '{"id": "test-003", "input": "Summarize the water cycle.", "description": "Science education test case", '
    '"metadata_field": "example"}\n'
)

GUIDE_YAML = """\
- id: test-001
  input: Explain what Python is in simple terms.
  description: Basic Python explanation
  task: Explain programming language
  expected_constraints: Keep it under 100 words, use simple language
  reference: Python is a popular programming language known for its readability and ease of use.
  difficulty: easy
  topic: programming

- id: test-002
  input: Write a function to calculate factorial of a number.
  task: Code generation
  expected_constraints: Use recursion, include docstring
  custom_tag: algorithms

- id: test-003
  input: Summarize the water cycle.
  description: Science education test case
  metadata_field: example
"""
GUIDE_DUPLICATE = '{"id": "test-001", "input": "First case"}\n{"id": "test-001", "input": "Duplicate ID!"}\n'
BAD_ID = "Invalid test case at index 0: id field validation failed"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert isinstance(info.value, ValueError)
    return info.value


class TestLoadDatasetFormats:
    @pytest.mark.parametrize(("name", "text"), [("sample.jsonl", GUIDE_JSONL), ("sample.yaml", GUIDE_YAML), ("sample.yml", GUIDE_YAML)])
    def test_guide_examples_load_identically(self, tmp_path: Path, name: str, text: str) -> None:
        path = write(tmp_path, name, text)
        cases, meta = load_dataset(path)
        assert [c.id for c in cases] == ["test-001", "test-002", "test-003"]
        first = cases[0]
        assert first.input == "Explain what Python is in simple terms."
        assert first.description == "Basic Python explanation"
        assert first.task == "Explain programming language"
        assert first.expected_constraints == "Keep it under 100 words, use simple language"
        assert first.reference.startswith("Python is a popular")
        assert first.metadata == {"difficulty": "easy", "topic": "programming"}
        assert cases[1].description is None and cases[1].reference is None
        assert cases[1].metadata == {"custom_tag": "algorithms"}
        assert cases[2].metadata == {"metadata_field": "example"}
        assert meta["count"] == 3 and meta["format"] == path.suffix
        assert meta["path"] == str(path.resolve()) and Path(meta["path"]).is_absolute()
        assert meta["hash"] == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()

    def test_relative_path_is_reported_absolute(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        write(tmp_path, "rel.jsonl", GUIDE_JSONL)
        monkeypatch.chdir(tmp_path)
        _, meta = load_dataset(Path("rel.jsonl"))
        assert meta["path"] == str(tmp_path / "rel.jsonl")

    @pytest.mark.parametrize(
        ("name", "text", "ids"),
        [
            # Blank JSONL lines, and YAML comments and blank lines, are skipped; the order is kept.
            ("b.jsonl", '{"id": "test-001", "input": "First case"}\n\n'
             '{"id": "test-002", "input": "Second case"}\n   \n', ["test-001", "test-002"]),
            ("c.yaml", "# Production test cases\n- id: prod-001\n  input: Test case for production\n\n"
             "# Experimental test cases\n- id: exp-001\n  input: Experimental test case\n",
             ["prod-001", "exp-001"]),
            ("o.jsonl", "".join(json.dumps({"id": f"c{i}", "input": "x"}) + "\n" for i in (3, 1, 2)),
             ["c3", "c1", "c2"]),
        ],
    )
    def test_records_in_order(self, tmp_path: Path, name: str, text: str, ids: list[str]) -> None:
        cases, meta = load_dataset(write(tmp_path, name, text))
        assert [c.id for c in cases] == ids and meta["count"] == len(ids)

    def test_mixed_metadata_types_and_multiline(self, tmp_path: Path) -> None:
        text = "- id: test-001\n  input: |\n    line one\n    line two\n  priority: 1\n  tags: [a, b, c]\n  config:\n    strict: true\n    timeout: 30\n"
        (case,), _ = load_dataset(write(tmp_path, "m.yaml", text))
        assert case.input == "line one\nline two\n"
        assert case.metadata == {"priority": 1, "tags": ["a", "b", "c"], "config": {"strict": True, "timeout": 30}}

    def test_yaml_dates_in_metadata_become_iso_strings(self, tmp_path: Path) -> None:
        (case,), _ = load_dataset(write(tmp_path, "d.yaml", "- id: a\n  input: b\n  since: 2024-01-15\n"))
        assert case.metadata == {"since": "2024-01-15"}
        json.dumps(case.metadata)  # storable in a JSON column

    def test_testcase_is_not_collected_by_pytest(self) -> None:
        assert TestCase.__test__ is False

    def test_empty_optional_null_is_absent(self, tmp_path: Path) -> None:
        (case,), _ = load_dataset(write(tmp_path, "n.jsonl", '{"id": "a", "input": "b", "reference": null}\n'))
        assert case.reference is None and case.metadata == {}

    def test_hash_changes_with_line_endings(self, tmp_path: Path) -> None:
        a = write(tmp_path, "u.jsonl", '{"id": "a", "input": "b"}\n')
        b = tmp_path / "w.jsonl"
        b.write_bytes(b'{"id": "a", "input": "b"}\r\n')
        assert load_dataset(a)[1]["hash"] != load_dataset(b)[1]["hash"]


class TestLoadDatasetErrors:
    @pytest.mark.parametrize(
        ("name", "text", "message", "line"),
        [
            ("dup.jsonl", GUIDE_DUPLICATE, "Duplicate test case ID 'test-001' found at line 2", 2),
            # YAML: the line of the duplicate record's start, after a comment and a blank line.
            ("dup.yaml", "# header\n- id: test-001\n  input: a\n\n- id: test-001\n  input: b\n",
             "Duplicate test case ID 'test-001' found at line 5", 5),
            ("m.jsonl", '{"input": "Missing ID field"}\n',
             "Record at line 1 is missing required field: id", 1),
            ("m.jsonl", '{"id": "a", "input": "x"}\n\n{"id": "b"}\n',
             "Record at line 3 is missing required field: input", 3),
            ("e.yaml", '- id: ""\n  input: "Empty ID string"\n', BAD_ID, 1),
            # The index counts records, not lines: the second record sits on line 3.
            ("e.jsonl", '{"id": "a", "input": "x"}\n\n{"id": "b", "input": ""}\n',
             "Invalid test case at index 1: input field validation failed", 3),
            ("w.jsonl", '{"id": "   ", "input": "x"}\n', BAD_ID, 1),
            ("i.yaml", "- id: 42\n  input: x\n", BAD_ID, 1),
            ("o.jsonl", '{"id": "a", "input": "x", "task": 3}\n',
             "Invalid test case at index 0: task field validation failed", 1),
            ("j.jsonl", '["id", "input"]\n', "Record at line 1 is not an object (found list)", 1),
        ],
    )
    def test_message_and_line(self, tmp_path: Path, name: str, text: str, message: str, line: int) -> None:
        path = write(tmp_path, name, text)
        err = load_error(path)
        assert (str(err), err.line, err.path) == (message, line, str(path))
        assert err.location == f"{path}:{line}: {message}"

    @pytest.mark.parametrize("name", ["dataset.csv", "dataset.json", "dataset.txt"])
    def test_unsupported_extension(self, tmp_path: Path, name: str) -> None:
        err = load_error(tmp_path / name)  # checked before the file is opened
        ext = Path(name).suffix
        assert str(err) == f"Unsupported dataset file format: {ext}. Supported formats: .jsonl, .yaml, .yml"

    def test_missing_file(self, tmp_path: Path) -> None:
        assert "not found" in str(load_error(tmp_path / "nope.jsonl"))

    def test_invalid_json_names_line(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "j.jsonl", '{"id": "a", "input": "x"}\n{"id": "b", "input": "y",}\n'))
        assert err.line == 2 and str(err).startswith("Invalid JSON at line 2")

    def test_invalid_yaml_names_line(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "y.yaml", "- id: a\n  input: x\n- id: b\n  input: [unclosed\n"))
        assert err.line is not None and str(err).startswith("Invalid YAML")

    def test_yaml_that_is_not_a_list(self, tmp_path: Path) -> None:
        assert "must be a list" in str(load_error(write(tmp_path, "y.yaml", "id: a\ninput: b\n")))


class TestSupportFields:
    def test_reads_every_field(self) -> None:
        fields = {
            "category": "edge", "intent": "plan_change", "account": {"plan": "Enterprise"},
            "conversation": [{"role": "customer", "text": "hi"}], "kb_articles": ["KB-2011", "KB-2098"],
            "golden": True, "expected_behavior": "draft",
        }
        assert support_fields({**fields, "other": 1}) == fields
        assert support_fields({"difficulty": "easy"}) == {}  # absent fields are absent

    @pytest.mark.parametrize(
        ("meta", "field"),
        [
            ({"category": "weird"}, "category"),
            ({"intent": 3}, "intent"),
            ({"account": "Pro"}, "account"),
            ({"conversation": "hello"}, "conversation"),
            ({"conversation": [1]}, "conversation[0]"),
            ({"kb_articles": "KB-1"}, "kb_articles"),
            ({"kb_articles": [1]}, "kb_articles"),
            ({"golden": "yes"}, "golden"),
            ({"expected_behavior": "shrug"}, "expected_behavior"),
        ],
    )
    def test_bad_values_name_the_field(self, meta: dict, field: str) -> None:
        with pytest.raises(SupportFieldError) as info:
            support_fields(meta)
        assert str(info.value).startswith(f"{field}:")
