"""Progress: the bar's figures on a terminal, one line per finished case with --quiet or without a terminal."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import Result

from tests.evaluator.conftest import Evaluate, Evaluated, case_result
from tests.evaluator.fake_openai import FakeOpenAI
from webapp.evaluator import stats as st
from webapp.evaluator.artifact_models import Sample
from webapp.evaluator.client import ChatClient, ClientStats
from webapp.evaluator.command import LiveStatus, case_line
from webapp.evaluator.execution import Runtime, execute, make_client
from webapp.evaluator.preparation import EvalOptions, prepare

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
CASE_LINE = re.compile(r"^\[(\d+)/3\] case (c\d): completed, 2/2 samples, semantic_fidelity \d\.\d\d clarity \d\.\d\d$")


def case_lines(result: Result) -> list[re.Match[str]]:
    text = ANSI.sub("", result.output)
    return [m for m in (CASE_LINE.match(line.strip()) for line in text.splitlines()) if m]


class TestLines:
    @pytest.mark.parametrize("terminal", [False, True])
    def test_one_line_per_finished_case_without_a_terminal_or_quiet(
        self, evaluate: Evaluate, dataset: Path, monkeypatch: pytest.MonkeyPatch, terminal: bool
    ) -> None:
        if terminal:
            monkeypatch.setenv("FORCE_COLOR", "1")  # rich then treats the output as a terminal
        result = evaluate("-n", "2", *(["--quiet"] if terminal else []), dataset=dataset)
        assert result.exit_code == 0, result.output
        lines = case_lines(result)
        assert [int(m.group(1)) for m in lines] == [1, 2, 3]
        assert sorted(m.group(2) for m in lines) == ["c1", "c2", "c3"]
        assert " in flight · " not in result.output

    def test_terminal_shows_the_bar_with_its_figures(
        self, evaluated: Evaluated, dataset: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("FORCE_COLOR", "1")
        result, doc = evaluated("-n", "2", dataset=dataset)
        assert case_lines(result) == []
        lines = ANSI.sub("", result.output).splitlines()
        at = max(i for i, line in enumerate(lines) if " in flight · " in line)
        spent = doc["usage"]["cost_usd"]  # every call was made by this invocation
        assert re.fullmatch(rf"cases ━+ 3/3 \d:\d\d:\d\d \${spent:.4f}", lines[at - 1].strip()), lines[at - 1]
        figures = r"0 in flight · [\d.]+ calls/s · 0 cached · 0 retrying · ETA 0:00"
        assert re.fullmatch(figures, lines[at].strip()), lines[at]

    def test_case_line_of_a_partial_case(self) -> None:
        result = case_result(
            [Sample(sample_index=0, status="completed"), Sample(sample_index=1, status="judge_error")],
            status="partial",
            per_metric_stats={"clarity": st.metric_stats([4, 4]), "semantic_fidelity": st.metric_stats([])},
        )
        assert case_line(result, 2, 5) == "[2/5] case x: partial, 1/2 samples, clarity 4.00"


class TestLiveStatus:
    def test_figures(self) -> None:
        stats = ClientStats(api_calls=25, cache_hits=7, retries_waiting=2, cost_usd=0.0123)
        now = [100.0]  # a clock the test moves: the rates do not depend on how fast this runs
        status = LiveStatus(SimpleNamespace(stats=stats), samples_total=8, clock=lambda: now[0])
        status.runtime = SimpleNamespace(samples_in_flight=3)
        assert status.eta_seconds() is None
        now[0] += 10.0
        status.samples_done = 2
        assert status.eta_seconds() == 10.0 * 6 / 2
        assert status.text() == "3 in flight · 2.5 calls/s · 7 cached · 2 retrying · ETA 0:30"
        now[0] += 4.0
        assert status.eta_seconds() == 26.0  # counts down until the next case finishes
        assert status.cost() == "$0.0123"

    def test_a_busy_run_still_fits_80_columns(self) -> None:
        # 1,234 calls/s, 32 in flight, hours to go: rich would wrap a longer line and split the ETA off.
        stats = ClientStats(api_calls=12345, cache_hits=1000, retries_waiting=10, cost_usd=1.0)
        now = [100.0]
        status = LiveStatus(SimpleNamespace(stats=stats), samples_total=100_000, clock=lambda: now[0])
        status.runtime = SimpleNamespace(samples_in_flight=32)
        now[0] += 10.0
        status.samples_done = 100
        text = status.text()
        assert text.startswith("32 in flight · 1234.") and "ETA 2:46:" in text and len(text) < 80

    def test_the_time_left_never_climbs_mid_run(self) -> None:
        # issue 41: 4 cases of 5 samples, one finishing every 10 s, the bar refreshed every second:
        # the old figure (elapsed now x left / done) rose from 30 s to 39 s before each finish.
        now = [0.0]
        status = LiveStatus(SimpleNamespace(stats=ClientStats()), samples_total=20, clock=lambda: now[0])
        shown: list[float] = []
        for case in range(1, 4):
            for _ in range(10):
                now[0] += 1.0
                if now[0] % 10 == 0:
                    status.samples_done = 5 * case
                eta = status.eta_seconds()
                if eta is not None:
                    shown.append(eta)
        assert shown == sorted(shown, reverse=True) and shown[0] == 30.0 and shown[-1] == 10.0
        now[0] += 25.0  # the last case is late: the ETA has run out, work remains
        assert status.eta_seconds() == 0.0
        now[0] += 1.0
        status.samples_done = 20
        assert status.eta_seconds() == 0.0

    def test_retries_waiting_counts_calls_sleeping_before_a_retry(self, fake: FakeOpenAI) -> None:
        fake.unavailable_first = 1
        client = ChatClient(base_url=fake.base_url, api_key="k")
        seen: list[int] = []

        async def go() -> None:
            release = asyncio.Event()

            async def held(seconds: float) -> None:  # the retry's wait lasts until the test lets it go
                seen.append(client.stats.retries_waiting)
                await release.wait()

            client.sleep = held
            task = asyncio.ensure_future(
                client.complete(model="m", messages=[{"role": "user", "content": "hi"}], temperature=0, seed=None, sample_index=0)
            )
            await asyncio.wait_for(_until(lambda: bool(seen)), timeout=30)
            seen.append(client.stats.retries_waiting)
            release.set()
            await task
            await client.close()

        asyncio.run(go())
        assert seen == [1, 1]
        assert client.stats.retries_waiting == 0
        assert client.stats.retries == 1

    def test_samples_in_flight_stay_within_the_concurrency(self, fake: FakeOpenAI, dataset: Path, prompt_file: Path, tmp_path: Path) -> None:
        options = EvalOptions(
            dataset=dataset, system_prompt=prompt_file, output_dir=tmp_path / "o", base_url=fake.base_url, api_key="k", num_samples=4, concurrency=2
        )
        prepared = prepare(options)
        client = make_client(options, {})
        seen: list[int] = []
        holder: dict[str, Runtime] = {}

        async def go() -> None:
            try:
                await execute(
                    prepared, client, on_start=lambda rt: holder.setdefault("rt", rt), on_call=lambda: seen.append(holder["rt"].samples_in_flight)
                )
            finally:
                await client.close()

        asyncio.run(go())
        assert 1 <= max(seen) <= 2 * options.concurrency
        assert holder["rt"].samples_in_flight == 0
        assert holder["rt"].samples_finished == 12


async def _until(condition: Callable[[], bool]) -> None:
    """Return once `condition()` holds (the caller bounds the wait with asyncio.wait_for)."""
    while not condition():
        await asyncio.sleep(0.005)
