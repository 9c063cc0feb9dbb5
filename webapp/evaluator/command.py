"""What `evaluate-dataset` runs once its options are read: prepare, run with a progress bar, index, record, report.

Kept apart from webapp/evaluator/cli.py so that `prompt-evaluator --help` and `draftdesk --help`
load only Typer and the commands' signatures: this module brings the settings, SQLModel, the
services and (when a run starts) the openai SDK (issue 36 item 7).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
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
from webapp.evaluator.artifacts import MAIN_ARTIFACT, update_index
from webapp.evaluator.preparation import EvalOptions, EvaluationError, Prepared, prepare, prepare_resume
from webapp.evaluator.service import RecordError, RecordResult, check_recordable, record_evaluation
from webapp.evaluator.support import KbContext, kb_from_database, kb_from_file

if TYPE_CHECKING:  # these load the openai SDK (about a second): imported when a run starts, not by every `draftdesk` command

    from webapp.evaluator.client import ChatClient, ClientStats, Price
    from webapp.evaluator.execution import Runtime

EXIT_OK, EXIT_NOT_COMPLETED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A run refused before or while it starts: the command prints it and exits 2."""


@dataclass(frozen=True)
class RemoteTarget:
    """`--record --url URL`: record over the pipeline API (webapp.evaluator.remote_record), never in the local database."""

    url: str | None
    token: str | None
    fail_on_verdict: bool = False  # exit 1 when the recorded run's checks fail (default: the verdict is only printed)


def _kb_loader(kb: Path | None, settings: Settings, *, remote: bool = False) -> Callable[[], KbContext]:
    def load() -> KbContext:
        if kb is not None:
            return kb_from_file(kb)
        if remote:
            raise EvaluationError("--record --url: give --kb FILE (the local database, where the KB is otherwise read, is not opened)")
        with cli_session(settings) as session:
            return kb_from_database(session)

    return load


def _prepare(
    options: EvalOptions, *, resume: str | None, record: bool, settings: Settings, remote: bool = False
) -> tuple[Prepared, dict[str, Price]]:
    """Read the dataset, prompt and rubric (or the interrupted run) and the prices; raise UsageError when refused."""
    from webapp.evaluator.client import load_prices  # the openai SDK: see TYPE_CHECKING above

    try:
        spec = settings.eval_spec
        if resume:
            prepared = prepare_resume(
                resume,
                output_dir=options.output_dir,
                overrides=options,
                kb_loader_for=lambda kb: _kb_loader(kb, settings, remote=remote),
                spec=spec,
            )
        else:
            if options.dataset == Path() or options.system_prompt == Path():
                raise EvaluationError("--dataset and --system-prompt are required (unless --resume RUN_ID)")
            prepared = prepare(options, kb_loader=_kb_loader(options.kb, settings, remote=remote), spec=spec)
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


def _record_remote(console: Console, doc: DatasetEvaluation, remote: RemoteTarget, artifact: Path) -> int:
    """Record over the API and print the run and its verdict; return the exit code; raise UsageError (exit 2)."""
    from webapp.evaluator.remote_record import RemoteError, record_remote

    try:
        rec = record_remote(doc, url=remote.url, token=remote.token, artifact=artifact)
    except RemoteError as exc:
        raise UsageError(
            f"not recorded: {exc} (the artifacts in {artifact.parent} are complete; "
            f"send the run again with --resume {doc.run_id} --record)"
        ) from exc
    console.print(
        f"recorded on the server as run [bold]{rec.run_name}[/] ({rec.dataset}): {rec.created} draft(s) created, "
        f"{rec.unchanged} unchanged; verdict [bold]{rec.verdict.upper()}[/]",
        highlight=False,
    )
    if rec.text:
        console.print(rec.text, highlight=False, markup=False)
    return EXIT_NOT_COMPLETED if remote.fail_on_verdict and rec.verdict != "pass" else EXIT_OK


def _completed_run(options: EvalOptions, resume: str) -> DatasetEvaluation | None:
    """Return the artifact of run `resume` if it completed (then --record only sends it), else None."""
    from webapp.evaluator.preparation import read_document

    main = options.output_dir / resume / MAIN_ARTIFACT
    if not main.is_file():
        return None
    doc = read_document(main)
    return doc if doc.status == "completed" else None


def run_command(
    options: EvalOptions,
    *,
    resume: str | None = None,
    record: bool = False,
    quiet: bool = False,
    remote: RemoteTarget | None = None,
) -> int:
    """Prepare, run and report an evaluation; return the exit code (0 completed, 1 not); raise UsageError (exit 2)."""
    from webapp.evaluator.client import LlmConfigError  # the openai SDK: see TYPE_CHECKING above
    from webapp.evaluator.execution import make_client

    console = Console()
    if record and remote is not None:
        _check_target(remote)  # before any call is paid for
        if resume and (done := _completed_run(options, resume)) is not None:
            return _record_remote(console, done, remote, options.output_dir / resume / MAIN_ARTIFACT)
    settings = load_settings()
    prepared, prices = _prepare(options, resume=resume, record=record, settings=settings, remote=remote is not None)
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
    if record and not aborted and remote is None:
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
    code = EXIT_OK if doc.status == "completed" else EXIT_NOT_COMPLETED
    if record and remote is not None:  # as the database: any run that was not aborted is recorded
        code = max(code, _record_remote(console, doc, remote, prepared.run_dir / MAIN_ARTIFACT))
    return code


def _check_target(remote: RemoteTarget) -> None:
    """Refuse a missing or malformed --url/--token before the run starts."""
    from draftdesk_remote.client import RemoteError, Target

    try:
        Target.resolve(remote.url, remote.token)
    except RemoteError as exc:
        raise UsageError(f"--record --url: {exc}") from exc


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
        self.runtime: Runtime | None = None
        self.clock = clock  # seconds, monotonic; tests pass a fixed one so the rates are exact
        self.started = clock()
        self._done = 0
        self._done_at = self.started  # when samples_done last changed
        self._shown: float | None = None  # the ETA last shown

    @property
    def samples_done(self) -> int:
        """Return the samples finished so far."""
        return self._done

    @samples_done.setter
    def samples_done(self, value: int) -> None:
        if value != self._done:
            self._done, self._done_at = value, self.clock()

    def in_flight(self) -> int:
        """Return the samples being generated or judged now."""
        return self.runtime.samples_in_flight if self.runtime is not None else 0

    def eta_seconds(self) -> float | None:
        """Return the expected seconds left (None before the first finished sample); it never climbs.

        The pace is the average over completed work, taken when a case last finished (the time up
        to then over the samples done then), and the time left counts down from there between
        finishes: the old figure, elapsed-now over samples done, climbed at every refresh until
        the next case finished (issue 41). A new estimate above the one shown is not shown, unless
        the shown one has run out while work remains (the run is slower than its start promised).
        """
        if self._done == 0:
            return None
        pace = (self._done_at - self.started) / self._done
        eta = max(0.0, pace * (self.samples_total - self._done) - (self.clock() - self._done_at))
        if self._shown is not None and (self._shown > 0 or self._done >= self.samples_total):
            eta = min(eta, self._shown)
        self._shown = eta
        return eta

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


