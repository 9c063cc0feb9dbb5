"""load_dataset against every example and error case of the dataset format guide."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from webapp.datasets.loader import (
    DatasetError,
    SupportFieldError,
    TestCase,
    load_dataset,
    support_fields,
)

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
        assert meta["count"] == 3
        assert meta["format"] == path.suffix
        assert meta["path"] == str(path.resolve()) and Path(meta["path"]).is_absolute()
        assert meta["hash"] == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()

    def test_relative_path_is_reported_absolute(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        write(tmp_path, "rel.jsonl", GUIDE_JSONL)
        monkeypatch.chdir(tmp_path)
        _, meta = load_dataset(Path("rel.jsonl"))
        assert meta["path"] == str(tmp_path / "rel.jsonl")

    def test_blank_jsonl_lines_are_skipped(self, tmp_path: Path) -> None:
        path = write(tmp_path, "b.jsonl", '{"id": "test-001", "input": "First case"}\n\n{"id": "test-002", "input": "Second case"}\n   \n')
        cases, meta = load_dataset(path)
        assert [c.id for c in cases] == ["test-001", "test-002"]
        assert meta["count"] == 2

    def test_yaml_comments_and_blank_lines(self, tmp_path: Path) -> None:
        text = "# Production test cases\n- id: prod-001\n  input: Test case for production\n\n# Experimental test cases\n- id: exp-001\n  input: Experimental test case\n"
        cases, _ = load_dataset(write(tmp_path, "c.yaml", text))
        assert [c.id for c in cases] == ["prod-001", "exp-001"]

    def test_mixed_metadata_types_and_multiline(self, tmp_path: Path) -> None:
        text = "- id: test-001\n  input: |\n    line one\n    line two\n  priority: 1\n  tags: [a, b, c]\n  config:\n    strict: true\n    timeout: 30\n"
        (case,), _ = load_dataset(write(tmp_path, "m.yaml", text))
        assert case.input == "line one\nline two\n"
        assert case.metadata == {"priority": 1, "tags": ["a", "b", "c"], "config": {"strict": True, "timeout": 30}}

    def test_yaml_dates_in_metadata_become_iso_strings(self, tmp_path: Path) -> None:
        (case,), _ = load_dataset(write(tmp_path, "d.yaml", "- id: a\n  input: b\n  since: 2024-01-15\n"))
        assert case.metadata == {"since": "2024-01-15"}
        json.dumps(case.metadata)  # storable in a JSON column

    def test_order_is_preserved(self, tmp_path: Path) -> None:
        lines = "".join(json.dumps({"id": f"c{i}", "input": "x"}) + "\n" for i in (3, 1, 2))
        cases, _ = load_dataset(write(tmp_path, "o.jsonl", lines))
        assert [c.id for c in cases] == ["c3", "c1", "c2"]

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
    def test_duplicate_id_names_its_line(self, tmp_path: Path) -> None:
        path = write(tmp_path, "dup.jsonl", '{"id": "test-001", "input": "First case"}\n{"id": "test-001", "input": "Duplicate ID!"}\n')
        err = load_error(path)
        assert str(err) == "Duplicate test case ID 'test-001' found at line 2"
        assert err.line == 2 and err.path == str(path)

    def test_duplicate_id_in_yaml_names_the_record_line(self, tmp_path: Path) -> None:
        path = write(tmp_path, "dup.yaml", "# header\n- id: test-001\n  input: a\n\n- id: test-001\n  input: b\n")
        err = load_error(path)
        assert str(err) == "Duplicate test case ID 'test-001' found at line 5"
        assert err.location == f"{path}:5: Duplicate test case ID 'test-001' found at line 5"

    def test_missing_id(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "m.jsonl", '{"input": "Missing ID field"}\n'))
        assert str(err) == "Record at line 1 is missing required field: id"
        assert err.line == 1

    def test_missing_input(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "m.jsonl", '{"id": "a", "input": "x"}\n\n{"id": "b"}\n'))
        assert str(err) == "Record at line 3 is missing required field: input"

    def test_empty_id_in_yaml(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "e.yaml", '- id: ""\n  input: "Empty ID string"\n'))
        assert str(err) == "Invalid test case at index 0: id field validation failed"
        assert err.line == 1

    def test_empty_input_index_counts_records_not_lines(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "e.jsonl", '{"id": "a", "input": "x"}\n\n{"id": "b", "input": ""}\n'))
        assert str(err) == "Invalid test case at index 1: input field validation failed"
        assert err.line == 3

    def test_whitespace_only_id_is_empty(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "w.jsonl", '{"id": "   ", "input": "x"}\n'))
        assert str(err) == "Invalid test case at index 0: id field validation failed"

    def test_non_string_id(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "i.yaml", "- id: 42\n  input: x\n"))
        assert str(err) == "Invalid test case at index 0: id field validation failed"

    def test_non_string_optional_field(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "o.jsonl", '{"id": "a", "input": "x", "task": 3}\n'))
        assert str(err) == "Invalid test case at index 0: task field validation failed"

    @pytest.mark.parametrize("name", ["dataset.csv", "dataset.json", "dataset.txt"])
    def test_unsupported_extension(self, tmp_path: Path, name: str) -> None:
        err = load_error(tmp_path / name)  # checked before the file is opened
        ext = Path(name).suffix
        assert str(err) == f"Unsupported dataset file format: {ext}. Supported formats: .jsonl, .yaml, .yml"

    def test_missing_file(self, tmp_path: Path) -> None:
        err = load_error(tmp_path / "nope.jsonl")
        assert "not found" in str(err)

    def test_invalid_json_names_line(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "j.jsonl", '{"id": "a", "input": "x"}\n{"id": "b", "input": "y",}\n'))
        assert err.line == 2 and str(err).startswith("Invalid JSON at line 2")

    def test_json_line_that_is_not_an_object(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "j.jsonl", '["id", "input"]\n'))
        assert str(err) == "Record at line 1 is not an object (found list)"

    def test_invalid_yaml_names_line(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "y.yaml", "- id: a\n  input: x\n- id: b\n  input: [unclosed\n"))
        assert err.line is not None and str(err).startswith("Invalid YAML")

    def test_yaml_that_is_not_a_list(self, tmp_path: Path) -> None:
        err = load_error(write(tmp_path, "y.yaml", "id: a\ninput: b\n"))
        assert "must be a list" in str(err)


class TestSupportFields:
    def test_reads_every_field(self) -> None:
        meta = {
            "category": "edge",
            "intent": "plan_change",
            "account": {"plan": "Enterprise"},
            "conversation": [{"role": "customer", "text": "hi"}],
            "kb_articles": ["KB-2011", "KB-2098"],
            "golden": True,
            "expected_behavior": "draft",
            "other": 1,
        }
        assert support_fields(meta) == {k: v for k, v in meta.items() if k != "other"}

    def test_absent_fields_are_absent(self) -> None:
        assert support_fields({"difficulty": "easy"}) == {}

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
