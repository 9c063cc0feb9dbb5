"""What `evaluate-dataset` runs once its options are read: prepare, run with a progress bar, index, record, report.

Kept apart from webapp/evaluator/cli.py so that `prompt-evaluator --help` and `draftdesk --help`
load only Typer and the commands' signatures: this module brings the settings, SQLModel, the
services and (when a run starts) the openai SDK (issue 36 item 7).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from webapp.core.cli_support import cli_session, load_settings
from webapp.core.config import Settings
from webapp.evaluator.aggregation import index_entry
from webapp.evaluator.artifact_models import DatasetEvaluation, Execution, TestCaseResult
from webapp.evaluator.artifacts import update_index
from webapp.evaluator.preparation import EvalOptions, EvaluationError, Prepared, prepare, prepare_resume
from webapp.evaluator.service import RecordError, RecordResult, check_recordable, record_evaluation
from webapp.evaluator.support import KbContext, kb_from_database, kb_from_file

if TYPE_CHECKING:  # these load the openai SDK (about a second): imported when a run starts, not by every `draftdesk` command

    from webapp.evaluator.client import ChatClient, ClientStats, Price
    from webapp.evaluator.execution import Runtime

EXIT_OK, EXIT_NOT_COMPLETED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A run refused before or while it starts: the command prints it and exits 2."""


def _kb_loader(kb: Path | None, settings: Settings) -> Callable[[], KbContext]:
    def load() -> KbContext:
        if kb is not None:
            return kb_from_file(kb)
        with cli_session(settings) as session:
            return kb_from_database(session)

    return load


def _prepare(options: EvalOptions, *, resume: str | None, record: bool, settings: Settings) -> tuple[Prepared, dict[str, Price]]:
    """Read the dataset, prompt and rubric (or the interrupted run) and the prices; raise UsageError when refused."""
    from webapp.evaluator.client import load_prices  # the openai SDK: see TYPE_CHECKING above

    try:
        spec = settings.eval_spec
        if resume:
            prepared = prepare_resume(
                resume,
                output_dir=options.output_dir,
                overrides=options,
                kb_loader_for=lambda kb: _kb_loader(kb, settings),
                spec=spec,
            )
        else:
            if options.dataset == Path() or options.system_prompt == Path():
                raise EvaluationError("--dataset and --system-prompt are required (unless --resume RUN_ID)")
            prepared = prepare(options, kb_loader=_kb_loader(options.kb, settings), spec=spec)
        prices = load_prices(settings.evaluator_prices)
        if record:
            check_recordable(prepared.cases)
    except (EvaluationError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    return prepared, prices


def _announce(console: Console, prepared: Prepared, client: ChatClient) -> int:
    """Print the KB warning, the planned calls and the cache use; return the planned calls."""
    from webapp.evaluator.execution import planned_calls

    if prepared.kb is not None and not prepared.kb.current:
        console.print(
            f"[yellow]warning:[/] the KB ({prepared.kb.source or 'none'}) has no current article: "
            "drafts will not be grounded (give --kb FILE or import the KB first)",
            highlight=False,
        )
    total, cached = planned_calls(prepared, client)
    n_cases, n = len(prepared.cases), prepared.options.num_samples
    k = prepared.options.judge_repeats
    done = len(prepared.done)
    generations = total // (1 + k)
    judge_note = f" ({k} per sample)" if k > 1 else ""
    console.print(
        f"run {prepared.run_id}: {n_cases} test case(s) × {n} sample(s)"
        + (f", {done} sample(s) already done" if done else "")
        + f" → {total} call(s) ({generations} generations + {total - generations} judgements{judge_note}); "
        f"{cached} from the cache, [bold]{total - cached} API call(s)[/]",
        highlight=False,
    )
    console.print(f"cache: {_planned_cache(client, cached, total)}", highlight=False)
    return total


def _record(settings: Settings, doc: DatasetEvaluation) -> RecordResult:
    """Store the finished run in the database; the run's checks record "run_checked", whose reactions run after the commit (cli_session)."""
    with cli_session(settings) as session:
        rec = record_evaluation(session=session, document=doc, spec=settings.eval_spec)
    return rec


def run_command(
    options: EvalOptions, *, resume: str | None = None, record: bool = False, quiet: bool = False
) -> int:
    """Prepare, run and report an evaluation; return the exit code (0 completed, 1 not); raise UsageError (exit 2)."""
    from webapp.evaluator.client import LlmConfigError  # the openai SDK: see TYPE_CHECKING above
    from webapp.evaluator.execution import make_client

    console = Console()
    settings = load_settings()
    prepared, prices = _prepare(options, resume=resume, record=record, settings=settings)
    client = make_client(prepared.options, prices)
    total = _announce(console, prepared, client)
    try:
        doc, aborted = _run_with_progress(prepared, client, total, console, quiet=quiet)
    except LlmConfigError as exc:
        update_index(prepared.options.output_dir, index_entry(prepared.document))
        raise UsageError(
            f"the API refused the run: {exc}. The run is marked aborted; "
            f"fix this and finish it with --resume {prepared.run_id}"
        ) from exc
    s = client.stats
    execution = Execution(
        api_calls=s.api_calls,
        cache_hits=s.cache_hits,
        retries=s.retries,
        rate_limited=s.rate_limited,
        resumed=bool(resume),
        cache=client.cache_report(),
    )
    update_index(prepared.options.output_dir, index_entry(doc, execution=execution))
    rec = None
    if record and not aborted:
        # Recorded (committed) before the summary is printed: a reader that stops early loses nothing.
        try:
            rec = _record(settings, doc)
        except RecordError as exc:
            _summary(console, doc, prepared, s)
            raise UsageError(f"{exc} (the artifacts in {prepared.run_dir} are complete)") from exc
    _summary(console, doc, prepared, s)
    if aborted:
        console.print(
            f"[yellow]aborted[/]: partial artifacts in {prepared.run_dir}; finish with --resume {prepared.run_id}",
            highlight=False,
        )
        return EXIT_NOT_COMPLETED
    if rec is not None:
        console.print(f"recorded as run [bold]{rec.run_name}[/] (id {rec.run_pk}) with {rec.drafts} draft(s)", highlight=False)
    return EXIT_OK if doc.status == "completed" else EXIT_NOT_COMPLETED


def _planned_cache(client: ChatClient, cached: int, total: int) -> str:
    """Say before the run how the cache will be used (the artifact's `cache` says how it was)."""
    if client.cache is None:
        return "off (--no-cache)"
    where = client.cache.root
    if not client.reuse_cache:
        return f"fresh (new samples, still written to {where}; --seed or --cache reuses them)"
    return f"reused {cached} of {total} from {where}"


class _HasStats(Protocol):
    """A ChatClient, or anything with its `stats` (the tests' stand-in)."""

    @property
    def stats(self) -> ClientStats: ...


class LiveStatus:
    """What the progress bar shows besides cases done: samples in flight, calls/s, cache hits, retries, ETA."""

    def __init__(self, client: _HasStats, samples_total: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client  # a ChatClient, or anything with its `stats`
        self.samples_total = samples_total
        self.samples_done = 0
        self.runtime: Runtime | None = None
        self.clock = clock  # seconds, monotonic; tests pass a fixed one so the rates are exact
        self.started = clock()

    def in_flight(self) -> int:
        """Return the samples being generated or judged now."""
        return self.runtime.samples_in_flight if self.runtime is not None else 0

    def eta_seconds(self) -> float | None:
        """Return the expected seconds left, from the pace of finished samples (None before the first)."""
        if self.samples_done == 0:
            return None
        elapsed = self.clock() - self.started
        return elapsed * (self.samples_total - self.samples_done) / self.samples_done

    def text(self) -> str:
        """Return the status line shown after the bar."""
        s = self.client.stats
        elapsed = max(self.clock() - self.started, 1e-9)
        eta = self.eta_seconds()
        eta_text = "--:--" if eta is None else _clock(eta)
        return (
            # Short words: the line must fit an 80-column terminal even at 1000 calls/s (rich wraps it).
            f"{self.in_flight()} in flight · {s.api_calls / elapsed:.1f} calls/s · "
            f"{s.cache_hits} cached · {s.retries_waiting} retrying · ETA {eta_text}"
        )

    def cost(self) -> str:
        """Return what this invocation has spent so far ("+" when a model has no price)."""
        s = self.client.stats
        return f"${s.cost_usd:.4f}{'' if s.cost_known else '+'}"


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def case_line(result: TestCaseResult, done: int, total: int) -> str:
    """Return the one line printed per finished case with --quiet or when the output is not a terminal."""
    samples = result.samples
    ok = sum(1 for s in samples if s.status == "completed")
    means = " ".join(f"{m} {v.mean:.2f}" for m, v in result.per_metric_stats.items() if v.mean is not None)
    return f"[{done}/{total}] case {result.test_case_id}: {result.status}, {ok}/{len(samples)} samples" + (
        f", {means}" if means else ""
    )


def _run_with_progress(
    prepared: Prepared, client: ChatClient, total: int, console: Console, *, quiet: bool = False
) -> tuple[DatasetEvaluation, bool]:
    from webapp.evaluator.execution import execute, run_async  # the openai SDK: see TYPE_CHECKING above

    n_cases = len(prepared.cases)
    n = prepared.options.num_samples
    samples_left = n_cases * n - len(prepared.done)
    cases_done = sum(1 for c in prepared.cases if all((c.id, i) in prepared.done for i in range(n)))
    status = LiveStatus(client, samples_left)
    live = console.is_terminal and not quiet
    progress = _TwoLineProgress(
        status,
        TextColumn("[bold]cases"),
        BarColumn(bar_width=30),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        _CostColumn(status),
        console=console,
        disable=not live,
    )
    task = progress.add_task("cases", total=n_cases, completed=cases_done)
    counter = {"done": cases_done}

    def on_call() -> None:
        pass

    def on_case(result: TestCaseResult) -> None:
        counter["done"] += 1
        status.samples_done += sum(1 for s in result.samples if (result.test_case_id, s.sample_index) not in prepared.done)
        if live:
            progress.update(task, completed=counter["done"])
        else:
            console.print(case_line(result, counter["done"], n_cases), highlight=False, soft_wrap=True, markup=False)

    def on_start(rt: Runtime) -> None:
        status.runtime = rt
        status.started = time.monotonic()

    aborted = False
    with progress:

        async def main() -> DatasetEvaluation:
            try:
                return await execute(prepared, client, on_call=on_call, on_case=on_case, on_start=on_start)
            finally:
                await client.close()

        try:
            doc = run_async(main())
        except KeyboardInterrupt:
            aborted = True
            doc = prepared.document
    return doc, aborted


class _CostColumn(ProgressColumn):
    """The money spent so far, after the bar."""

    def __init__(self, status: LiveStatus) -> None:
        super().__init__()
        self.status = status

    def render(self, task: Task) -> Text:
        """Return the cost text."""
        return Text(self.status.cost())


class _TwoLineProgress(Progress):
    """The bar on one line and the live figures on the next, so both fit an 80-column terminal.

    The figures are rendered at every refresh, so rates and the ETA move between finished cases.
    """

    def __init__(self, status: LiveStatus, *columns: ProgressColumn, console: Console, disable: bool) -> None:
        self.status = status  # set first: the parent's constructor may render already
        super().__init__(*columns, console=console, transient=False, disable=disable)

    def get_renderables(self) -> Iterable[RenderableType]:
        """Yield the tasks' table, then the status line."""
        yield self.make_tasks_table(self.tasks)
        yield Text(self.status.text())


def _summary(console: Console, doc: DatasetEvaluation, prepared: Prepared, stats: ClientStats) -> None:
    table = Table(title=f"run {doc.run_id} — {doc.status}", show_lines=False)
    table.add_column("metric")
    table.add_column("mean of means", justify="right")
    table.add_column("cases", justify="right")
    for name, v in doc.overall_metric_stats.items():
        mom = "—" if v.mean_of_means is None else f"{v.mean_of_means:.2f}"
        table.add_row(name, mom, str(v.num_cases))
    for name, f in doc.overall_flag_stats.items():
        prop = "—" if f.true_proportion is None else f"{f.true_proportion:.0%}"
        table.add_row(f"flag {name}", prop, f"{f.true_count}/{f.total_count}")
    console.print(table)
    for r in doc.test_case_results:
        for m in r.high_variance_metrics:
            s = r.per_metric_stats[m]
            console.print(
                f"⚠ HIGH VARIABILITY {r.test_case_id} {m}: mean={s.mean or 0:.2f} std={s.std or 0:.2f} "
                f"min={s.min} max={s.max}",
                highlight=False,
            )
    agreement = doc.judge_self_agreement
    if agreement:
        rows = [*agreement.metrics.items(), *agreement.flags.items()]
        parts = [f"{name} {v.pairwise_agreement:.0%}" for name, v in rows if v.pairwise_agreement is not None]
        console.print(
            f"judge self-agreement ({agreement.repeats} judgements per sample, pairwise): " + (" · ".join(parts) or "—"),
            highlight=False,
        )
    console.print(
        f"{stats.api_calls} API call(s), {stats.cache_hits} from cache, {stats.retries} retried; "
        f"cache: {doc.cache}; artifacts: {prepared.run_dir / 'dataset_evaluation.json'}",
        highlight=False,
    )


