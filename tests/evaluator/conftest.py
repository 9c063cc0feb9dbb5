"""Fixtures of the evaluator tests: the fake OpenAI server, datasets, and running the command."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tests.evaluator.fake_openai import FakeOpenAI
from webapp.evaluator.artifact_models import IndexEntry, RunStatus, Sample, TestCaseResult
from webapp.evaluator.artifacts import MAIN_ARTIFACT, read_json

Evaluate = Callable[..., Result]
Evaluated = Callable[..., tuple[Result, dict[str, Any]]]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep every test's answer cache in its own folder, never in the user's cache directory."""
    path = tmp_path / "answer-cache"
    monkeypatch.setenv("PROMPT_EVALUATOR_CACHE_DIR", str(path))
    return path


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """A fake OpenAI-compatible server on 127.0.0.1 answering at once."""
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def prompt_file(tmp_path: Path) -> Path:
    path = tmp_path / "system.txt"
    path.write_text("You are a helpful assistant. Follow every constraint.\n", encoding="utf-8")
    return path


def write_dataset(path: Path, cases: list[dict[str, Any]]) -> Path:
    """Write test cases as JSONL."""
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_dataset(
        tmp_path / "data.jsonl",
        [
            {"id": "c1", "input": "Explain DNS.", "expected_constraints": "Under 80 words"},
            {"id": "c2", "input": "Summarise the water cycle.", "task": "Summarise", "topic": "science"},
            {"id": "c3", "input": "List three prime numbers."},
        ],
    )


@pytest.fixture
def evaluate(
    fake: FakeOpenAI, prompt_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Evaluate:
    """Run `prompt-evaluator evaluate-dataset` in-process against the fake server; extra args appended."""
    from webapp.evaluator.cli import app

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("DRAFTDESK_MODE", "dev")

    def run(*args: str, dataset: Path | None = None, out: Path | None = None, base: bool = True) -> Result:
        argv = ["evaluate-dataset"]
        if base:
            argv += ["-s", str(prompt_file), "--base-url", fake.base_url, "-o", str(out or tmp_path / "runs")]
            if dataset is not None:
                argv += ["-d", str(dataset)]
        return CliRunner().invoke(app, argv + list(args))

    return run


@pytest.fixture
def evaluated(evaluate: Evaluate, tmp_path: Path) -> Evaluated:
    """Like `evaluate`, for a run that must exit 0 alone in its output folder: return the result and artifact."""

    def run(*args: str, out: Path | None = None, **kwargs: Any) -> tuple[Result, dict[str, Any]]:
        out = out or tmp_path / "runs"
        result = evaluate(*args, out=out, **kwargs)
        assert result.exit_code == 0, result.output
        return result, only_run(out)

    return run


def only_run(out: Path) -> dict[str, Any]:
    """Return the main artifact of the single run under `out`."""
    dirs = [d for d in out.iterdir() if d.is_dir() and not d.name.startswith(".")]
    assert len(dirs) == 1, dirs
    return read_json(dirs[0] / MAIN_ARTIFACT)


def case_result(samples: list[Sample], **fields: Any) -> TestCaseResult:
    """A test case result with `samples` and no case details; `fields` set the rest."""
    details = dict.fromkeys(("description", "task", "expected_constraints", "reference"))
    empty = {"metadata": {}, "per_metric_stats": {}, "per_flag_stats": {}}
    return TestCaseResult(
        test_case_id="x", test_case_input="in", num_samples=2, samples=samples, **details, **{**empty, **fields}
    )


def index_entry(run_id: str, status: RunStatus = "completed") -> IndexEntry:
    """Return a minimal runs/index.json entry."""
    return IndexEntry(
        run_id=run_id, description="", status=status, timestamp_start="2026-11-23T00:00:00+00:00",
        timestamp_end=None, dataset_path="d.jsonl", dataset_hash="sha256:0", rubric="default",
        rubric_hash="sha256:1", generator_model="g", judge_model="j", num_cases=1, num_samples_per_case=1,
        overall_metrics={}, overall_flags={},
    )  # fmt: skip
