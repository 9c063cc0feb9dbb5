"""Interrupted runs: Ctrl-C marks a run aborted with valid artifacts; --resume finishes it as if never stopped."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.evaluator.conftest import Evaluate, Evaluated, only_run, write_dataset
from tests.evaluator.fake_openai import FakeOpenAI
from tests.waiting import wait_for
from webapp.evaluator import execution
from webapp.evaluator.artifacts import JOURNAL, MAIN_ARTIFACT, case_file_name, read_json
from webapp.evaluator.preparation import EvalOptions, prepare

ROOT = Path(__file__).resolve().parents[2]
CASES = [{"id": f"case-{i}", "input": f"Question number {i}?"} for i in range(6)]
VOLATILE = ("run_id", "timestamp_start", "timestamp_end")  # what legitimately differs between two runs


def start_run(server: FakeOpenAI, dataset: Path, prompt: Path, out: Path) -> subprocess.Popen[str]:
    """Start the command in a child process (so it can be killed or interrupted for real)."""
    env = dict(os.environ, OPENAI_API_KEY="k", DRAFTDESK_MODE="dev", PYTHONPATH=str(ROOT))
    cmd = [
        sys.executable, "-m", "webapp.evaluator.cli", "evaluate-dataset",
        "-d", str(dataset), "-s", str(prompt), "-o", str(out), "--base-url", server.base_url,
        "-n", "3", "--seed", "11", "--concurrency", "2", "--no-cache",
    ]  # fmt: skip
    # Ctrl-C as in a terminal: a runner started in the background by a non-interactive shell
    # (as CI may be) passes SIGINT down ignored, and Python then never raises KeyboardInterrupt
    return subprocess.Popen(
        cmd, env=env, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip


def wait_for_calls(server: FakeOpenAI, n: int, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    def reached() -> bool:
        assert proc.poll() is None, proc.communicate()
        return server.calls >= n

    wait_for(reached, timeout=timeout, what=f"the run to send {n} calls")


def completed_in_journal(run_dir: Path) -> int:
    lines = (run_dir / JOURNAL).read_text(encoding="utf-8").splitlines()
    return sum(1 for line in lines if line.strip() and json.loads(line)["sample"]["status"] == "completed")


class TestAbortAndResume:
    def test_killed_run_resumes_to_the_same_artifact(
        self, fake: FakeOpenAI, evaluate: Evaluate, evaluated: Evaluated, prompt_file: Path, tmp_path: Path
    ) -> None:
        dataset = write_dataset(tmp_path / "d.jsonl", CASES)
        out = tmp_path / "killed"
        fake.hold_after = 14  # the run cannot finish before it is killed
        proc = start_run(fake, dataset, prompt_file, out)
        wait_for_calls(fake, 14, proc)
        proc.kill()  # SIGKILL: no chance to clean up
        proc.wait()
        fake.release()
        # the server finishes the requests the dead client left in flight
        wait_for(lambda: fake.in_flight == 0, timeout=30, what="the dead client's requests to end")
        doc = only_run(out)  # the main artifact is still valid JSON
        run_id = doc["run_id"]
        run_dir = out / run_id
        done = completed_in_journal(run_dir)
        assert 0 < done < 18
        generator_calls_before = fake.by_kind["generator"]
        resumed = evaluate("--resume", run_id, "-o", str(out), "--base-url", fake.base_url, "--no-cache", base=False)
        assert resumed.exit_code == 0, resumed.output
        # no completed sample was generated again
        assert fake.by_kind["generator"] - generator_calls_before == 18 - done
        final = read_json(run_dir / MAIN_ARTIFACT)
        assert final["status"] == "completed"
        assert final["run_id"] == run_id

        reference_out = tmp_path / "uninterrupted"
        _, reference = evaluated("-n", "3", "--seed", "11", "--no-cache", dataset=dataset, out=reference_out)
        assert {k: v for k, v in final.items() if k not in VOLATILE} == {
            k: v for k, v in reference.items() if k not in VOLATILE
        }
        for case in CASES:
            assert read_json(run_dir / case_file_name(case["id"])) == read_json(
                reference_out / reference["run_id"] / case_file_name(case["id"])
            )
        index = read_json(out / "index.json")["runs"]
        assert [r["run_id"] for r in index] == [run_id]  # one entry per run, updated by the resume
        assert index[0]["status"] == "completed"

    def test_ctrl_c_marks_the_run_aborted(
        self, fake: FakeOpenAI, evaluate: Evaluate, prompt_file: Path, tmp_path: Path
    ) -> None:
        dataset = write_dataset(tmp_path / "d.jsonl", CASES)
        out = tmp_path / "out"
        # calls after the 12th are held until the run has stopped: it cannot finish before Ctrl-C, however
        # slowly this process gets to send it (under xdist on a busy machine it once finished first and exited 0)
        fake.hold_after = 12
        proc = start_run(fake, dataset, prompt_file, out)
        wait_for_calls(fake, 10, proc)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=30)
        fake.release()
        assert proc.returncode == 1
        assert "aborted" in stdout
        doc = only_run(out)
        assert doc["status"] == "aborted"
        assert doc["timestamp_end"] is None
        assert "pending" in [r["status"] for r in doc["test_case_results"]]
        assert any(s["status"] == "pending" for r in doc["test_case_results"] for s in r["samples"])
        finished = [r for r in doc["test_case_results"] if r["status"] == "completed"]
        assert finished  # judge calls go first, so the first cases were already complete
        for r in finished:
            assert (out / doc["run_id"] / case_file_name(r["test_case_id"])).is_file()
        # overall statistics are computed from the finished cases only
        for metric, o in doc["overall_metric_stats"].items():
            assert o["num_cases"] == sum(1 for r in finished if r["per_metric_stats"][metric]["count"])
        assert read_json(out / "index.json")["runs"][0]["status"] == "aborted"

        # the dataset changes: resuming is refused
        dataset.write_text(dataset.read_text(encoding="utf-8") + '{"id": "new", "input": "x"}\n', encoding="utf-8")
        refused = evaluate("--resume", doc["run_id"], "-o", str(out), base=False)
        assert refused.exit_code == 2
        assert "the dataset changed since run" in " ".join(refused.output.split())

    def test_resume_of_unknown_run(self, evaluate: Evaluate, tmp_path: Path) -> None:
        result = evaluate("--resume", "nope", base=False)
        assert result.exit_code == 2
        assert "no run 'nope'" in result.output


def test_an_abort_waits_for_the_case_files_of_completed_cases(
    fake: FakeOpenAI, dataset: Path, prompt_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a finished case's file is still being written: the aborted document calls the
    case completed, so its file must be there when the aborted document is written (the write was
    once dropped). The case file's write is held until the cancellation has reached the case's task,
    so the abort always arrives while the write is under way (no timing: events)."""
    real_write = execution.write_text_atomic
    real_write_artifact = execution.write_artifact
    cancelled = threading.Event()  # set once the task of the first finished case has been cancelled
    held_writes: list[bool] = []  # per case-file write: did the cancellation arrive while it was held?
    missing_at_abort: list[list[str]] = []

    def held_write(path: Path, text: str) -> None:
        held_writes.append(cancelled.wait(timeout=30))
        real_write(path, text)

    def checked_write_artifact(path: Path, doc: Any, **kwargs: Any) -> None:
        if path.name == MAIN_ARTIFACT and doc.status == "aborted":
            done = [r.test_case_id for r in doc.test_case_results if r.status == "completed"]
            missing_at_abort.append([c for c in done if not (path.parent / case_file_name(c)).is_file()])
        real_write_artifact(path, doc, **kwargs)

    monkeypatch.setattr(execution, "write_text_atomic", held_write)
    monkeypatch.setattr(execution, "write_artifact", checked_write_artifact)
    options = EvalOptions(
        dataset=dataset, system_prompt=prompt_file, output_dir=tmp_path / "o", base_url=fake.base_url, api_key="k"
    )
    prepared = prepare(options)
    client = execution.make_client(options, {})

    async def go() -> None:
        run = asyncio.current_task()
        assert run is not None

        def on_case(result: object) -> None:
            case_task = asyncio.current_task()  # the finished case's own task, about to write its file
            assert case_task is not None
            if not cancelled.is_set() and not run.cancelling():
                case_task.add_done_callback(lambda t: cancelled.set())
            run.cancel()

        try:
            await execution.execute(prepared, client, on_case=on_case)
        finally:
            await client.close()

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())
    assert held_writes and all(held_writes)  # every case file was still being written when the abort came
    assert missing_at_abort == [[]]  # the aborted document was written once, after the case files
    doc = only_run(tmp_path / "o")
    assert doc["status"] == "aborted"
    finished = [r for r in doc["test_case_results"] if r["status"] == "completed"]
    assert finished
    for r in finished:
        assert (prepared.run_dir / case_file_name(r["test_case_id"])).is_file()
