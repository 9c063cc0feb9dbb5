"""`prompt-evaluator evaluate-dataset` end to end against the fake OpenAI server on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.evaluator.conftest import Evaluate, Evaluated, case_result, only_run, write_dataset
from tests.evaluator.fake_openai import FakeOpenAI
from webapp.evaluator.aggregation import finish_case
from webapp.evaluator.artifact_models import Sample
from webapp.evaluator.artifacts import case_file_name, read_json
from webapp.evaluator.client import ChatClient
from webapp.evaluator.execution import execute, make_client
from webapp.evaluator.preparation import EvalOptions, EvaluationError, prepare
from webapp.evaluator.rubric import load_rubric

GUIDE_FIELDS = {
    "run_id", "dataset_path", "dataset_hash", "dataset_count", "num_samples_per_case", "status",
    "timestamp_start", "timestamp_end", "system_prompt_path", "generator_config", "judge_config",
    "rubric_metadata", "test_case_results", "overall_metric_stats", "overall_flag_stats",
}  # fmt: skip


def run_programmatically(
    fake: FakeOpenAI, dataset: Path, prompt: Path, out: Path, max_attempts: int = 6, **kwargs: object
) -> tuple[dict, ChatClient]:
    """Run an evaluation through the Python API with tiny backoff (retry tests stay fast); return the JSON."""
    options = EvalOptions(
        dataset=dataset, system_prompt=prompt, output_dir=out, base_url=fake.base_url, api_key="k", **kwargs  # type: ignore[arg-type]
    )
    prepared = prepare(options)
    client = make_client(options, {}, backoff_base=0.001, max_attempts=max_attempts)

    async def go() -> dict:
        try:
            return (await execute(prepared, client)).to_json_dict()
        finally:
            await client.close()

    return asyncio.run(go()), client


class TestCompletedRun:
    def test_artifacts_have_every_field_of_the_guide(
        self, evaluated: Evaluated, dataset: Path, tmp_path: Path, fake: FakeOpenAI
    ) -> None:
        _, doc = evaluated("-n", "3", "--seed", "1", dataset=dataset)
        assert set(doc) >= GUIDE_FIELDS
        assert doc["status"] == "completed"
        assert doc["timestamp_end"] is not None
        assert doc["dataset_path"] == str(dataset.resolve())
        assert doc["dataset_hash"] == "sha256:" + hashlib.sha256(dataset.read_bytes()).hexdigest()
        assert doc["dataset_count"] == 3
        assert doc["num_samples_per_case"] == 3
        assert doc["rubric_metadata"]["name"] == "default"
        assert doc["rubric_metadata"]["hash"].startswith("sha256:")
        assert [r["test_case_id"] for r in doc["test_case_results"]] == ["c1", "c2", "c3"]
        assert fake.calls == 3 * 3 * 2
        assert fake.by_kind["judge"] == 3 * 3  # one judgement per sample by default (--judge-repeats 1)
        assert doc["judge_config"]["repeats"] == 1 and doc["judge_self_agreement"] is None
        run_dir = tmp_path / "runs" / doc["run_id"]
        for r in doc["test_case_results"]:
            assert r["status"] == "completed"
            assert [s["sample_index"] for s in r["samples"]] == [0, 1, 2]
            assert all(s["status"] == "completed" and "judge_repeats" not in s for s in r["samples"])
            # the streamed per-case file holds the same result
            assert read_json(run_dir / case_file_name(r["test_case_id"])) == r
        assert doc["test_case_results"][1]["metadata"] == {"topic": "science"}

    def test_case_ids_with_one_slug_each_get_their_own_file(
        self, evaluated: Evaluated, tmp_path: Path
    ) -> None:
        ids = ["a/b", "a b", "a_b"]
        data = write_dataset(tmp_path / "slugs.jsonl", [{"id": i, "input": f"Say {n}."} for n, i in enumerate(ids)])
        _, doc = evaluated("-n", "1", dataset=data)
        run_dir = tmp_path / "runs" / doc["run_id"]
        assert len(list(run_dir.glob("test_case_*.json"))) == 3
        for r in doc["test_case_results"]:
            assert read_json(run_dir / case_file_name(r["test_case_id"])) == r
        assert (run_dir / "test_case_a_b.json").is_file()  # the plain id keeps its plain name
        assert read_json(run_dir / "test_case_a_b.json")["test_case_id"] == "a_b"

    def test_statistics_match_the_samples(self, evaluated: Evaluated, dataset: Path) -> None:
        _, doc = evaluated("-n", "4", "--seed", "9", dataset=dataset)
        case_means = {"semantic_fidelity": [], "clarity": []}
        for r in doc["test_case_results"]:
            for metric in ("semantic_fidelity", "clarity"):
                scores = [s["judge_scores"][metric] for s in r["samples"]]
                stats = r["per_metric_stats"][metric]
                assert stats["mean"] == pytest.approx(np.mean(scores))
                assert stats["std"] == pytest.approx(np.std(scores, ddof=1))
                assert (stats["min"], stats["max"], stats["count"]) == (min(scores), max(scores), 4)
                high = stats["std"] > 1.0 or stats["std"] > 0.2 * stats["mean"]
                assert stats["high_variance"] is high
                assert (metric in r["high_variance_metrics"]) is high
                case_means[metric].append(np.mean(scores))
            flags = [s["flags"]["omitted_constraints"] for s in r["samples"]]
            assert r["per_flag_stats"]["omitted_constraints"]["true_count"] == sum(flags)
        for metric, means in case_means.items():
            assert doc["overall_metric_stats"][metric]["mean_of_means"] == pytest.approx(np.mean(means))
        flags = [s["flags"]["omitted_constraints"] for r in doc["test_case_results"] for s in r["samples"]]
        assert doc["overall_flag_stats"]["omitted_constraints"]["true_count"] == sum(flags)
        assert doc["overall_flag_stats"]["omitted_constraints"]["total_count"] == 12

    def test_judge_gets_a_strict_schema_from_the_rubric(
        self, evaluate: Evaluate, dataset: Path, fake: FakeOpenAI
    ) -> None:
        assert evaluate("-n", "1", "--max-cases", "1", dataset=dataset).exit_code == 0
        judge = [r for r in fake.requests if (r.get("response_format") or {}).get("type") == "json_schema"]
        assert len(judge) == 1
        schema = judge[0]["response_format"]["json_schema"]
        assert schema["strict"] is True
        props = schema["schema"]["properties"]
        scale = {"type": "integer", "minimum": 1, "maximum": 5}
        assert props["semantic_fidelity"] == {**scale, "description": props["semantic_fidelity"]["description"]}
        assert props["omitted_constraints"]["type"] == "boolean"
        assert props["rationale"]["type"] == "string"
        assert set(schema["schema"]["required"]) == {"semantic_fidelity", "clarity", "omitted_constraints", "rationale"}
        assert judge[0]["temperature"] == 0.0

    def test_index_keeps_one_entry_per_run(self, evaluate: Evaluate, dataset: Path, tmp_path: Path) -> None:
        assert evaluate("-n", "1", "--description", "baseline", dataset=dataset).exit_code == 0
        assert evaluate("-n", "1", "--temperature", "0.3", dataset=dataset).exit_code == 0
        index = read_json(tmp_path / "runs" / "index.json")
        assert len(index["runs"]) == 2
        assert len({r["run_id"] for r in index["runs"]}) == 2
        first = index["runs"][0]
        assert first["description"] == "baseline"
        assert first["dataset_hash"].startswith("sha256:") and first["rubric_hash"].startswith("sha256:")
        assert set(first["overall_metrics"]) == {"semantic_fidelity", "clarity"}


class TestCache:
    def test_errors_are_not_cached(self, fake: FakeOpenAI, prompt_file: Path, tmp_path: Path) -> None:
        ds = write_dataset(tmp_path / "d.jsonl", [{"id": "x", "input": "[[judge-500]] hello"}])
        out = tmp_path / "out"
        run_programmatically(fake, ds, prompt_file, out, num_samples=1, max_attempts=2, seed=4)
        assert fake.by_kind["judge"] == 2
        run_programmatically(fake, ds, prompt_file, out, num_samples=1, max_attempts=2, seed=4)
        assert fake.by_kind["generator"] == 1  # the generation was cached
        assert fake.by_kind["judge"] == 4  # the failed judgement was asked again


class TestSampleStatuses:
    def test_every_status_and_stats_leave_the_failures_out(self, fake: FakeOpenAI, prompt_file: Path, tmp_path: Path) -> None:
        expected = {  # case id: (the fake server's marker in its input, the status of its samples)
            "ok": ("", "completed"),
            "gen": ("[[gen-500]] ", "generation_error"),
            "judge": ("[[judge-500]] ", "judge_error"),
            "notjson": ("[[judge-notjson]] ", "judge_invalid_response"),
            "missing": ("[[judge-missing]] ", "judge_invalid_response"),
        }
        cases = [{"id": cid, "input": f"{marker}Say hello."} for cid, (marker, _) in expected.items()]
        ds = write_dataset(tmp_path / "d.jsonl", cases)
        doc, _ = run_programmatically(fake, ds, prompt_file, tmp_path / "out", num_samples=2, max_attempts=2)
        by_id = {r["test_case_id"]: r for r in doc["test_case_results"]}
        for cid, (_, status) in expected.items():
            assert [s["status"] for s in by_id[cid]["samples"]] == [status, status], cid
        assert "gave up after 2 attempts" in by_id["gen"]["samples"][0]["error"]
        assert "not JSON" in by_id["notjson"]["samples"][0]["error"]
        assert "'semantic_fidelity' is a required property" in by_id["missing"]["samples"][0]["error"]
        assert by_id["judge"]["samples"][0]["generator_output"] is not None
        assert by_id["ok"]["status"] == "completed"
        for cid in ("gen", "judge", "notjson", "missing"):
            assert by_id[cid]["status"] == "failed"
            assert by_id[cid]["per_metric_stats"]["clarity"]["count"] == 0
            assert by_id[cid]["per_flag_stats"]["omitted_constraints"]["total_count"] == 0
        assert doc["status"] == "partial"
        # the overall means come from the one case with valid samples
        ok_mean = by_id["ok"]["per_metric_stats"]["clarity"]["mean"]
        assert doc["overall_metric_stats"]["clarity"] == {
            "mean_of_means": ok_mean, "min_of_means": ok_mean, "max_of_means": ok_mean, "num_cases": 1
        }  # fmt: skip

    def test_run_statuses_partial_and_failed_exit_1(self, evaluate: Evaluate, tmp_path: Path) -> None:
        mixed = write_dataset(tmp_path / "m.jsonl", [{"id": "a", "input": "hi"}, {"id": "b", "input": "[[judge-notjson]]"}])
        result = evaluate("-n", "1", dataset=mixed, out=tmp_path / "o1")
        assert result.exit_code == 1
        assert only_run(tmp_path / "o1")["status"] == "partial"
        bad = write_dataset(tmp_path / "f.jsonl", [{"id": "a", "input": "[[judge-missing]]"}])
        result = evaluate("-n", "1", dataset=bad, out=tmp_path / "o2")
        assert result.exit_code == 1
        assert only_run(tmp_path / "o2")["status"] == "failed"

    def test_case_with_some_valid_samples_is_partial(self) -> None:
        scores = {"semantic_fidelity": 4, "clarity": 5}
        ok = Sample(sample_index=0, status="completed", judge_scores=scores, flags={"omitted_constraints": False})
        result = case_result([ok, Sample(sample_index=1, status="judge_error")])
        finish_case(result, load_rubric("default"))
        assert result.status == "partial"
        assert result.per_metric_stats["clarity"].count == 1


class TestRetries:
    def test_429_waits_for_retry_after(self, fake: FakeOpenAI, prompt_file: Path, tmp_path: Path) -> None:
        fake.rate_limit_first, fake.retry_after = 2, 0.3
        ds = write_dataset(tmp_path / "d.jsonl", [{"id": "a", "input": "hi"}])
        doc, client = run_programmatically(fake, ds, prompt_file, tmp_path / "o", num_samples=1, concurrency=4)
        assert doc["status"] == "completed"
        assert client.stats.rate_limited == 2
        assert fake.by_kind["429"] == 2
        # each 429 asked for 0.3 s: the next answered request came at least that long after the first 429
        assert fake.served_at[0] - fake.rate_limited_at[0] >= 0.29
        assert fake.rate_limited_at[1] - fake.rate_limited_at[0] >= 0.29
        # after a 429 the client lets fewer requests in flight
        assert client.limiter.limit < 4


class TestUsageErrors:
    @pytest.mark.parametrize(
        ("name", "text", "message"),
        [
            ("dup.jsonl", '{"id": "a", "input": "x"}\n' * 2, "Duplicate test case ID 'a' found at line 2"),
            ("m.jsonl", '{"input": "x"}\n', "Record at line 1 is missing required field: id"),
            ("d.csv", "id,input\n", "Unsupported dataset file format: .csv"),
        ],
    )
    def test_bad_dataset_exits_2_before_any_call(
        self, evaluate: Evaluate, tmp_path: Path, fake: FakeOpenAI, name: str, text: str, message: str
    ) -> None:
        (tmp_path / name).write_text(text, encoding="utf-8")
        result = evaluate(dataset=tmp_path / name)
        assert result.exit_code == 2
        assert message in " ".join(result.output.split())
        assert fake.calls == 0
        assert not (tmp_path / "runs").exists()

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--rubric", "nope"], "neither a built-in rubric"),
            (["--case-ids", "c1,zzz"], "no test case with id 'zzz'"),
            (["--kb", "kb.jsonl"], "--kb is only used by rubrics with output: support_draft"),
            (["--cache", "--no-cache"], "--cache and --no-cache cannot be combined"),
            (["--quick", "-n", "7"], "--quick and --num-samples/-n cannot be combined"),
            (["-n", "7", "--quick"], "--quick and --num-samples/-n cannot be combined"),
            (["--quick", "--num-samples", "2"], "--quick and --num-samples/-n cannot be combined"),
            (["-t", "2.5"], "--temperature must be between 0 and 2 (got 2.5)"),
            (["--temperature", "-0.1"], "--temperature must be between 0 and 2 (got -0.1)"),
            (["--concurrency", "0"], "--concurrency must be at least 1 (got 0)"),
            (["--concurrency", "-3"], "--concurrency must be at least 1 (got -3)"),
            (["-n", "0"], "--num-samples must be at least 1 (got 0)"),
            (["--max-cases", "0"], "--max-cases must be at least 1 (got 0)"),
            (["--judge-repeats", "0"], "--judge-repeats must be at least 1 (got 0)"),
        ],
    )
    def test_bad_or_conflicting_options_are_usage_errors(
        self, evaluate: Evaluate, dataset: Path, fake: FakeOpenAI, tmp_path: Path, args: list[str], message: str
    ) -> None:
        result = evaluate(*args, dataset=dataset)
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split())
        assert fake.calls == 0
        assert not (tmp_path / "runs").exists()

    def test_flag_bounds_are_accepted(self, evaluate: Evaluate, dataset: Path) -> None:
        assert evaluate("--quick", "-t", "0", "--concurrency", "1", "--max-cases", "1", dataset=dataset).exit_code == 0
        assert evaluate("-n", "1", "-t", "2", "--max-cases", "1", dataset=dataset).exit_code == 0

    def test_runner_refuses_a_temperature_out_of_range(self, dataset: Path, prompt_file: Path, tmp_path: Path) -> None:
        with pytest.raises(EvaluationError, match="--temperature must be between 0 and 2"):
            prepare(EvalOptions(dataset=dataset, system_prompt=prompt_file, temperature=2.01))

    def test_dataset_is_required(self, evaluate: Evaluate) -> None:
        result = evaluate()
        assert result.exit_code == 2
        assert "--dataset and --system-prompt are required" in " ".join(result.output.split())

    def test_bad_rubric_file_names_the_field(self, evaluate: Evaluate, dataset: Path, tmp_path: Path) -> None:
        rubric = tmp_path / "r.yaml"
        rubric.write_text("name: r\nmetrics:\n  - name: m\n    scale: {min: 5, max: 1}\n    description: d\n", encoding="utf-8")
        result = evaluate("--rubric", str(rubric), dataset=dataset)
        assert result.exit_code == 2
        assert "metrics.0.scale" in result.output


class TestSelection:
    def test_case_ids_keep_dataset_order(self, evaluated: Evaluated, dataset: Path) -> None:
        _, doc = evaluated("--case-ids", "c3,c1", "--quick", dataset=dataset)
        assert [r["test_case_id"] for r in doc["test_case_results"]] == ["c1", "c3"]
        assert doc["num_samples_per_case"] == 2
        assert doc["dataset_count"] == 3

    def test_max_cases(self, evaluated: Evaluated, dataset: Path, fake: FakeOpenAI) -> None:
        result, doc = evaluated("--max-cases", "2", "-n", "1", dataset=dataset)
        assert [r["test_case_id"] for r in doc["test_case_results"]] == ["c1", "c2"]
        assert "4 call(s)" in " ".join(result.output.split())
        assert fake.calls == 4


def test_yaml_example_dataset_runs(evaluated: Evaluated) -> None:
    """The example dataset shipped in examples/ evaluates cleanly."""
    example = Path(__file__).resolve().parents[2] / "examples" / "datasets" / "sample.yaml"
    _, doc = evaluated("--quick", dataset=example)
    assert json.dumps(doc)  # serialisable
    assert doc["dataset_format"] == ".yaml"


def test_draftdesk_evaluate_dataset(
    fake: FakeOpenAI, dataset: Path, prompt_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`draftdesk evaluate-dataset` is the same command."""
    from webapp.app.cli import app as draftdesk

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)  # the base URL from the environment
    result = CliRunner().invoke(
        draftdesk, ["evaluate-dataset", "-d", str(dataset), "-s", str(prompt_file), "-o", str(tmp_path / "r"), "-n", "1"]
    )
    assert result.exit_code == 0, result.output
    assert only_run(tmp_path / "r")["status"] == "completed"
    assert fake.calls == 6


def test_refused_key_stops_the_run_at_once(
    evaluate: Evaluate, dataset: Path, tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 401 is not a per-sample failure: the run stops, marked aborted, resumable once the key is fixed."""
    monkeypatch.setenv("OPENAI_API_KEY", "bad-key")
    out = tmp_path / "runs"
    result = evaluate("-n", "2", "--concurrency", "1", dataset=dataset)
    assert result.exit_code == 2
    assert "HTTP 401" in result.output and "check OPENAI_API_KEY" in result.output
    assert fake.by_kind["401"] == 1  # no retry, and no call for the other samples
    doc = only_run(out)
    assert doc["status"] == "aborted"
    monkeypatch.setenv("OPENAI_API_KEY", "good-key")
    resumed = evaluate("--resume", doc["run_id"], "-o", str(out), "--base-url", fake.base_url, base=False)
    assert resumed.exit_code == 0, resumed.output
