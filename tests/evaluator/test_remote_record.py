"""`evaluate-dataset --record --url URL`: the run recorded over the API of a live `draftdesk serve` (SQLite; PostgreSQL when configured).

The evaluator runs in-process against the fake OpenAI server; the Draft Desk server is a real
subprocess (tests/remote/test_ci_recipes.py's fixture) with a `ci` token. The local database must
not be opened on this path: its entry points are replaced by ones that fail the test.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.evaluator.conftest import Evaluate, only_run, write_dataset
from tests.evaluator.fake_openai import FakeOpenAI
from tests.evaluator.test_support import CASES, KB
from tests.remote.test_ci_recipes import Server, server  # noqa: F401 (the live server fixture)
from webapp.evaluator.artifacts import MAIN_ARTIFACT, read_json


@pytest.fixture
def no_local_db(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the evaluator opens the local database (a session, or the database recording)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the local database was opened")

    monkeypatch.setattr("webapp.evaluator.command.cli_session", refuse)
    monkeypatch.setattr("webapp.evaluator.command.record_evaluation", refuse)


def _get(srv: Server, path: str) -> httpx.Response:
    return httpx.get(f"{srv.url}/api/v1{path}", headers={"Authorization": f"Bearer {srv.token}"}, timeout=30)


@pytest.mark.slow
def test_record_over_the_api_sends_the_run_and_its_drafts_idempotently(
    server: Server,  # noqa: F811
    evaluate: Evaluate, fake: FakeOpenAI, tmp_path: Path, no_local_db: None,
) -> None:
    kb = write_dataset(tmp_path / "kb.jsonl", KB)
    ds = write_dataset(tmp_path / "cases.jsonl", CASES[:3])
    remote = ("--record", "--url", server.url, "--token", server.token)
    result = evaluate("--rubric", "support-draft", "--kb", str(kb), "-n", "2", *remote, dataset=ds)
    assert result.exit_code == 0, result.output
    doc = only_run(tmp_path / "runs")
    name = f"evaluator-{doc['run_id']}"
    printed = " ".join(result.output.split())
    assert f"recorded on the server as run {name} (cases@1): 6 draft(s) created, 0 unchanged; verdict" in printed, printed
    assert server.token not in result.output

    # The run and its drafts arrived, with the evaluator's model and prompt version.
    (run,) = [r for r in _get(server, "/runs").json() if r["name"] == name]
    assert run["drafts"] == 6 and run["state"] == "closed"
    assert run["model_version"] == "gpt-4o-mini"
    assert run["prompt_version"] == f"system.txt {doc['system_prompt_hash'][:19]}"
    body = _get(server, f"/runs/{name}/drafts").json()
    stored = {(d["case_id"], d["sample_index"]): d for d in body["drafts"]}
    assert len(stored) == 6
    for result_ in doc["test_case_results"]:
        for sample in result_["samples"]:
            out = sample["generator_output"]
            d = stored[(result_["test_case_id"], sample["sample_index"])]
            assert d["draft_text"] == out["draft"]
            assert d["escalated"] is bool(out["escalate"])
            assert d["citations"] == [{"article_id": c["article_id"], "revision": c.get("revision")} for c in out["citations"]]
    assert sum(1 for d in stored.values() if d["escalated"]) == 2  # the distress case, both samples

    # Sending the completed run again changes nothing and calls no model.
    calls = fake.calls
    again = evaluate("--resume", doc["run_id"], "-o", str(tmp_path / "runs"), *remote, base=False)
    assert again.exit_code == 0, again.output
    assert "0 draft(s) created, 6 unchanged" in " ".join(again.output.split()), again.output
    assert fake.calls == calls
    assert [r["drafts"] for r in _get(server, "/runs").json() if r["name"] == name] == [6]

    # A wrong token: one clear line, exit 2, the artifacts complete, nothing stored.
    out2 = tmp_path / "runs2"
    wrong = evaluate("--rubric", "support-draft", "--kb", str(kb), "-n", "1", "--record", "--url", server.url,
                     "--token", "dd_wrong", dataset=ds, out=out2)  # fmt: skip
    assert wrong.exit_code == 2, wrong.output
    assert re.search(r"error: not recorded: the token was refused \(401\)", " ".join(wrong.output.split()))
    assert "dd_wrong" not in wrong.output
    (run_dir,) = [d for d in out2.iterdir() if d.is_dir()]
    assert read_json(run_dir / MAIN_ARTIFACT)["status"] == "completed"
    assert [r for r in _get(server, "/runs").json() if r["name"] == f"evaluator-{run_dir.name}"] == []


def test_record_url_refuses_a_missing_token_or_kb_before_any_call(
    evaluate: Evaluate, fake: FakeOpenAI, tmp_path: Path, no_local_db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DRAFTDESK_TOKEN", raising=False)
    ds = write_dataset(tmp_path / "cases.jsonl", CASES[:1])
    no_token = evaluate("--record", "--url", "http://127.0.0.1:9", dataset=ds)
    assert no_token.exit_code == 2 and "DRAFTDESK_TOKEN (or --token)" in no_token.output
    no_kb = evaluate("--rubric", "support-draft", "--record", "--url", "http://127.0.0.1:9", "--token", "t", dataset=ds)
    assert no_kb.exit_code == 2 and "give --kb FILE" in " ".join(no_kb.output.split())
    alone = evaluate("--url", "http://127.0.0.1:9", dataset=ds)
    assert alone.exit_code == 2 and "--url goes with --record" in alone.output
    assert fake.calls == 0
