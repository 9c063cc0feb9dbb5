"""`prompt-evaluator evaluate-dataset` (also `draftdesk evaluate-dataset`): dataset-driven evaluation."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from webapp.core.cli_support import cli_session, guard_stdout, load_settings
from webapp.core.config import Settings
from webapp.evaluator.aggregation import index_entry
from webapp.evaluator.artifact_models import DatasetEvaluation, Execution, TestCaseResult
from webapp.evaluator.artifacts import update_index
from webapp.evaluator.cache import ResponseCache, default_cache_dir, parse_age
from webapp.evaluator.preparation import (
    EvalOptions,
    EvaluationError,
    Prepared,
    check_options,
    prepare,
    prepare_resume,
)
from webapp.evaluator.service import RecordError, check_recordable, record_evaluation
from webapp.evaluator.support import KbContext, kb_from_database, kb_from_file

if TYPE_CHECKING:  # these load the openai SDK (about a second): imported when a run starts, not by every `draftdesk` command
    from webapp.evaluator.client import ChatClient, ClientStats
    from webapp.evaluator.execution import Runtime

app = typer.Typer(help="Prompt Evaluator: dataset-driven evaluation with a generator and an LLM judge.", no_args_is_help=True)

EXIT_OK, EXIT_NOT_COMPLETED, EXIT_USAGE = 0, 1, 2


@app.callback()
def _root() -> None:
    """Prompt Evaluator."""


def _err(message: str) -> typer.Exit:
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_USAGE)


def evaluate_dataset(
    dataset: Path | None = typer.Option(None, "--dataset", "-d", help="Dataset file (.yaml, .yml or .jsonl)"),
    system_prompt: Path | None = typer.Option(None, "--system-prompt", "-s", help="System prompt file"),
    num_samples: int | None = typer.Option(None, "--num-samples", "-n", help="Samples per test case [default: 5]"),
    quick: bool = typer.Option(False, "--quick", help="Fast mode: 2 samples per case (not with -n)"),
    case_ids: str | None = typer.Option(None, "--case-ids", help="Only these test cases (comma-separated ids)"),
    max_cases: int | None = typer.Option(None, "--max-cases", help="Evaluate at most this many test cases"),
    rubric: str = typer.Option("default", "--rubric", help="Built-in rubric (default, support-draft) or a YAML file"),
    temperature: float = typer.Option(0.7, "--temperature", "-t", help="Generator temperature, 0 to 2"),
    seed: int | None = typer.Option(None, "--seed", help="Random seed for reproducibility"),
    output_dir: Path = typer.Option(Path("runs"), "--output-dir", "-o", help="Output directory"),
    generator_model: str = typer.Option("gpt-4o-mini", "--generator-model", help="Model that writes the outputs"),
    judge_model: str = typer.Option("gpt-4o-mini", "--judge-model", help="Model that scores them"),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible API URL (else OPENAI_BASE_URL)"),
    concurrency: int = typer.Option(8, "--concurrency", help="Requests in flight at most"),
    cache: bool = typer.Option(False, "--cache", help="Reuse cached answers even without --seed"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the answer cache"),
    cache_dir: Path | None = typer.Option(
        None, "--cache-dir", help="Answer cache folder (else $PROMPT_EVALUATOR_CACHE_DIR, else the user cache dir)"
    ),
    judge_repeats: int = typer.Option(1, "--judge-repeats", help="Judge each sample K times and report its self-agreement"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar: one line per finished test case"),
    resume: str | None = typer.Option(None, "--resume", metavar="RUN_ID", help="Finish an interrupted run"),
    kb: Path | None = typer.Option(None, "--kb", help="KB revisions file (as for `draftdesk import kb`)"),
    record: bool = typer.Option(False, "--record", help="Store the run in the Draft Desk database"),
    description: str = typer.Option("", "--description", help="A note kept with the run in runs/index.json"),
) -> None:
    """Evaluate a system prompt over every test case of a dataset, N samples each, scored by an LLM judge."""
    if quick and num_samples is not None:
        raise _err("--quick and --num-samples/-n cannot be combined: --quick means 2 samples per case")
    if cache and no_cache:
        raise _err("--cache and --no-cache cannot be combined")
    if quick:
        num_samples = 2
    ids = [i.strip() for i in case_ids.split(",") if i.strip()] if case_ids else None
    if case_ids is not None and not ids:
        raise _err("--case-ids: give at least one test case id")
    options = EvalOptions(
        dataset=dataset or Path(),
        system_prompt=system_prompt or Path(),
        num_samples=5 if num_samples is None else num_samples,
        case_ids=ids,
        max_cases=max_cases,
        rubric=rubric,
        temperature=temperature,
        seed=seed,
        output_dir=output_dir,
        generator_model=generator_model,
        judge_model=judge_model,
        base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
        api_key=os.environ.get("OPENAI_API_KEY"),
        concurrency=concurrency,
        use_cache=not no_cache,
        reuse_cache=cache,
        cache_dir=cache_dir,
        judge_repeats=judge_repeats,
        kb=kb,
        description=description,
    )
    if resume is None:
        try:
            check_options(options)  # before anything is read, so the flag is named first
        except EvaluationError as exc:
            raise _err(str(exc)) from exc
    code = run_command(options, resume=resume, record=record, quiet=quiet)
    raise typer.Exit(code)


def _kb_loader(kb: Path | None, settings: Settings) -> Callable[[], KbContext]:
    def load() -> KbContext:
        if kb is not None:
            return kb_from_file(kb)
        with cli_session(settings) as session:
            return kb_from_database(session)

    return load


def run_command(options: EvalOptions, *, resume: str | None = None, record: bool = False, quiet: bool = False) -> int:
    """Prepare, run and report an evaluation; return the exit code (0 completed, 1 not, 2 usage)."""
    from webapp.evaluator.client import LlmConfigError, load_prices  # the openai SDK: see TYPE_CHECKING above
    from webapp.evaluator.execution import make_client, planned_calls

    console = Console()
    settings = load_settings()
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
        raise _err(str(exc)) from exc

    if prepared.kb is not None and not prepared.kb.current:
        console.print(
            f"[yellow]warning:[/] the KB ({prepared.kb.source or 'none'}) has no current article: "
            "drafts will not be grounded (give --kb FILE or import the KB first)",
            highlight=False,
        )
    client = make_client(prepared.options, prices)
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
    try:
        doc, aborted = _run_with_progress(prepared, client, total, console, quiet=quiet)
    except LlmConfigError as exc:
        update_index(prepared.options.output_dir, index_entry(prepared.document))
        raise _err(
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
            with cli_session(settings) as session:
                rec = record_evaluation(session=session, document=doc, spec=settings.eval_spec)
                if rec.checks_run:
                    # imported here, by the one step that reacts across domains: `--help` and every run that
                    # records nothing skip loading alerts, PPI, pandas and scipy (~1.8 s; issue 36 item 7)
                    from webapp.app import flows

                    flows.after_run_checked(session=session, spec=settings.eval_spec, run_id=rec.run_pk)
        except RecordError as exc:
            _summary(console, doc, prepared, s)
            raise _err(f"{exc} (the artifacts in {prepared.run_dir} are complete)") from exc
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


class LiveStatus:
    """What the progress bar shows besides cases done: samples in flight, calls/s, cache hits, retries, ETA."""

    def __init__(self, client: Any, samples_total: int, *, clock: Callable[[], float] = time.monotonic) -> None:
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
        transient=False,
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

    def render(self, task: Any) -> Text:
        """Return the cost text."""
        return Text(self.status.cost())


class _TwoLineProgress(Progress):
    """The bar on one line and the live figures on the next, so both fit an 80-column terminal.

    The figures are rendered at every refresh, so rates and the ETA move between finished cases.
    """

    def __init__(self, status: LiveStatus, *columns: Any, **kwargs: Any) -> None:
        self.status = status  # set first: the parent's constructor may render already
        super().__init__(*columns, **kwargs)

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


app.command("evaluate-dataset")(evaluate_dataset)

cache_app = typer.Typer(help="The answer cache shared by every run (see `cache info`).", no_args_is_help=True)
app.add_typer(cache_app, name="cache")
CACHE_DIR_OPTION = typer.Option(
    None, "--cache-dir", help="Answer cache folder (else $PROMPT_EVALUATOR_CACHE_DIR, else the user cache dir)"
)


@cache_app.command("info")
def cache_info(cache_dir: Path | None = CACHE_DIR_OPTION) -> None:
    """Show where the answer cache is, how many answers it holds and their size."""
    info = ResponseCache(default_cache_dir(cache_dir)).info()
    console = Console()
    console.print(f"cache: {info.root}", highlight=False, soft_wrap=True)
    console.print(f"{info.entries:,} answer(s), {info.size_bytes:,} bytes", highlight=False)
    if info.oldest is not None and info.newest is not None:
        fmt = "%Y-%m-%d %H:%M"
        oldest = dt.datetime.fromtimestamp(info.oldest).strftime(fmt)
        newest = dt.datetime.fromtimestamp(info.newest).strftime(fmt)
        console.print(f"last used: oldest {oldest}, newest {newest}", highlight=False)


@cache_app.command("clear")
def cache_clear(
    older_than: str | None = typer.Option(None, "--older-than", help="Only answers not used for this long: 30d, 12h, 90m, 2w"),
    cache_dir: Path | None = CACHE_DIR_OPTION,
) -> None:
    """Remove cached answers (all of them, or those not used for --older-than)."""
    age: int | None = None
    if older_than is not None:
        try:
            age = parse_age(older_than)
        except ValueError as exc:
            raise _err(f"--older-than: {exc}") from exc
    cache = ResponseCache(default_cache_dir(cache_dir))
    removed = cache.clear(older_than=age)
    what = f" not used for {older_than}" if older_than else ""
    Console().print(f"removed {removed:,} answer(s){what} from {cache.root}", highlight=False, soft_wrap=True)


def register(root: typer.Typer, import_app: typer.Typer) -> None:
    """Add `draftdesk evaluate-dataset`."""
    root.command("evaluate-dataset")(evaluate_dataset)


def main() -> None:
    """Entry point of the `prompt-evaluator` console script."""
    guard_stdout()
    app()


if __name__ == "__main__":
    main()
