"""Hostile files: alias bombs, deep nesting, unreadable lines are refused with FILE:LINE and exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.datasets.helpers import invoke
from webapp.core.safe_input import MAX_ALIAS_TOTAL, MAX_DEPTH, InputLimitError, load_yaml, loads_json
from webapp.datasets.records import RecordError, read_records

DEPTH_400K = 200_000  # 200 000 "[" and 200 000 "]": a 400 kB file


def alias_bomb(levels: int = 7) -> str:
    """Return a dataset whose metadata nests aliases `levels` deep: 10**levels values from ~300 bytes."""
    lines = ["- id: bomb", "  m:", "    a: &a [x,x,x,x,x,x,x,x,x,x]"]
    names = "abcdefghij"
    for prev, cur in zip(names[: levels - 1], names[1:levels], strict=True):
        lines.append(f"    {cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "match", "line"),
    [
        # Each *c stands for 1 111 nodes (under the per-alias limit); 100 of them exceed the document's.
        (alias_bomb(3) + "    z: [" + ",".join(["*c"] * 100) + "]\n", f"than {MAX_ALIAS_TOTAL} nodes", 6),
        ("a: &a\n  - x\n  - *a\n", "recursive alias", 3),
    ],
)
def test_alias_limits_name_the_line(text: str, match: str, line: int) -> None:
    with pytest.raises(InputLimitError, match=match) as info:
        load_yaml(text)
    assert info.value.line == line


def test_ordinary_aliases_and_merge_keys_still_load() -> None:
    value = load_yaml("base: &b {plan: pro, tier: 2}\ncases:\n  - <<: *b\n    id: c1\n  - <<: *b\n    id: c2\n")
    assert value["cases"] == [{"plan": "pro", "tier": 2, "id": "c1"}, {"plan": "pro", "tier": 2, "id": "c2"}]


def test_depth_limit_is_exact() -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert loads_json(ok) is not None and load_yaml(ok) is not None
    with pytest.raises(InputLimitError):
        loads_json("[" + ok + "]")
    with pytest.raises(InputLimitError):
        load_yaml("[" + ok + "]")
    records = read_records(b'{"id": "a", "m": {"k": [1, [2, [3]]]}}\n', path="x.jsonl")
    assert records[0].data == json.loads('{"id": "a", "m": {"k": [1, [2, [3]]]}}')


def test_kb_drafts_and_model_answer_readers_refuse_bombs_and_depth() -> None:
    from webapp.evaluator.support import parse_draft
    from webapp.kb.records import parse_kb
    from webapp.runs.service import parse_drafts

    with pytest.raises(RecordError) as info:
        parse_kb(alias_bomb().encode(), path="kb.yaml")
    assert info.value.location.startswith("kb.yaml:7: Refused: YAML alias")
    deep = ('{"x": ' + "[" * 5000 + "]" * 5000 + "}\n").encode()
    with pytest.raises(RecordError) as info:
        parse_drafts(deep, path="drafts.jsonl")
    assert info.value.location == f"drafts.jsonl:1: Refused: nesting deeper than {MAX_DEPTH} levels"
    with pytest.raises(RecordError):
        read_records(deep, path="kb.jsonl")
    with pytest.raises(ValueError, match="nesting deeper"):
        parse_draft('{"draft": ' + "[" * 50_000 + "]" * 50_000 + "}")


def test_spec_and_rubric_refuse_bombs_with_file_line(tmp_path: Path) -> None:
    from webapp.core.spec import SpecError, load_spec
    from webapp.evaluator.rubric import RubricError, load_rubric

    spec = tmp_path / "spec.yaml"
    spec.write_text("targets:\n" + "\n".join("  " + line for line in alias_bomb().splitlines()) + "\n")
    with pytest.raises(SpecError, match=rf"^{spec}:8: refused: YAML alias \*d"):
        load_spec(spec)
    rubric = tmp_path / "r.yaml"
    rubric.write_text("name: r\nmetrics: " + "[" * 1000 + "]" * 1000 + "\n")
    with pytest.raises(RubricError, match=rf"^{rubric}:2: refused: nesting deeper"):
        load_rubric(str(rubric))


def test_events_file_deep_line_oversized_csv_field_and_bad_utf8_exit_2(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"event_id": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    big = tmp_path / "big.csv"
    big.write_text("event_id,ticket_id\n" + "x" * 200_000 + ",t\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"event_id": "e1"}\n{"event_id": "\xff"}\n')
    for f, where in ((deep, f"{deep}:1:"), (big, f"{big}:2: (line): cannot be read: field larger"), (bad, f"{bad}:2: (line): not valid UTF-8")):
        r = invoke(monkeypatch, db_url, ["import", "events", str(f), "--quiet"])
        assert r.exit_code == 2, r.output[-800:]
        assert where in r.output
        assert "Traceback" not in r.output and "nothing imported" in r.output
