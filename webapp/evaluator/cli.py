"""`prompt-evaluator evaluate-dataset` (also `draftdesk evaluate-dataset`): dataset-driven evaluation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

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
    num_samples: int = typer.Option(5, "--num-samples", "-n", help="Samples per test case"),
    quick: bool = typer.Option(False, "--quick", help="Fast mode: 2 samples per case"),
    case_ids: str | None = typer.Option(None, "--case-ids", help="Only these test cases (comma-separated ids)"),
    max_cases: int | None = typer.Option(None, "--max-cases", help="Evaluate at most this many test cases"),
    rubric: str = typer.Option("default", "--rubric", help="Built-in rubric (default, support-draft) or a YAML file"),
    temperature: float = typer.Option(0.7, "--temperature", "-t", help="Generator temperature"),
    seed: int | None = typer.Option(None, "--seed", help="Random seed for reproducibility"),
    output_dir: Path = typer.Option(Path("runs"), "--output-dir", "-o", help="Output directory"),
    generator_model: str = typer.Option("gpt-4o-mini", "--generator-model", help="Model that writes the outputs"),
    judge_model: str = typer.Option("gpt-4o-mini", "--judge-model", help="Model that scores them"),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible API URL (else OPENAI_BASE_URL)"),
    concurrency: int = typer.Option(8, "--concurrency", help="Requests in flight at most"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the answer cache"),
    resume: str | None = typer.Option(None, "--resume", metavar="RUN_ID", help="Finish an interrupted run"),
    kb: Path | None = typer.Option(None, "--kb", help="KB revisions file (as for `draftdesk import kb`)"),
    record: bool = typer.Option(False, "--record", help="Store the run in the Draft Desk database"),
    description: str = typer.Option("", "--description", help="A note kept with the run in runs/index.json"),
) -> None:
    """Evaluate a system prompt over every test case of a dataset, N samples each, scored by an LLM judge."""
    from webapp.evaluator import runner

    if quick:
        num_samples = 2
    ids = [i.strip() for i in case_ids.split(",") if i.strip()] if case_ids else None
    if case_ids is not None and not ids:
        raise _err("--case-ids: give at least one test case id")
    options = runner.EvalOptions(
        dataset=dataset or Path(),
        system_prompt=system_prompt or Path(),
        num_samples=num_samples,
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
        kb=kb,
        description=description,
    )
    code = run_command(options, resume=resume, record=record)
    raise typer.Exit(code)


def _kb_loader(kb: Path | None, settings: Any) -> Any:
    from webapp.evaluator.support import KbContext, kb_from_database, kb_from_file

    def load() -> KbContext:
        if kb is not None:
            return kb_from_file(kb)
        from webapp.cli_support import cli_session

        with cli_session(settings) as session:
            return kb_from_database(session)

    return load


def run_command(options: Any, *, resume: str | None = None, record: bool = False) -> int:
    """Prepare, run and report an evaluation; return the exit code (0 completed, 1 not, 2 usage)."""
    from webapp.cli_support import load_settings
    from webapp.evaluator import runner
    from webapp.evaluator.client import load_prices

    console = Console()
    settings = load_settings()
    try:
        spec = settings.eval_spec
        if resume:
            prepared = runner.prepare_resume(
                resume,
                output_dir=options.output_dir,
                overrides=options,
                kb_loader_for=lambda kb: _kb_loader(kb, settings),
                spec=spec,
            )
        else:
            if options.dataset == Path() or options.system_prompt == Path():
                raise runner.EvaluationError("--dataset and --system-prompt are required (unless --resume RUN_ID)")
            prepared = runner.prepare(options, kb_loader=_kb_loader(options.kb, settings), spec=spec)
        prices = load_prices(settings.evaluator_prices)
        if record:
            from webapp.evaluator.service import check_recordable

            check_recordable(prepared.cases)
    except (runner.EvaluationError, ValueError) as exc:
        raise _err(str(exc)) from exc

    if prepared.kb is not None and not prepared.kb.current:
        console.print(
            f"[yellow]warning:[/] the KB ({prepared.kb.source or 'none'}) has no current article: "
            "drafts will not be grounded (give --kb FILE or import the KB first)",
            highlight=False,
        )
    client = runner.make_client(prepared.options, prices)
    total, cached = runner.planned_calls(prepared, client)
    n_cases, n = len(prepared.cases), prepared.options.num_samples
    done = len(prepared.done)
    console.print(
        f"run {prepared.run_id}: {n_cases} test case(s) × {n} sample(s)"
        + (f", {done} sample(s) already done" if done else "")
        + f" → {total} call(s) ({total // 2} generations + {total // 2} judgements); "
        f"{cached} from the cache, [bold]{total - cached} API call(s)[/]",
        highlight=False,
    )
    from webapp.evaluator.client import LlmConfigError

    try:
        doc, aborted = _run_with_progress(prepared, client, total, console)
    except LlmConfigError as exc:
        from webapp.evaluator.artifacts import update_index

        update_index(prepared.options.output_dir, runner.index_entry(prepared.document))
        raise _err(
            f"the API refused the run: {exc}. The run is marked aborted; "
            f"fix this and finish it with --resume {prepared.run_id}"
        ) from exc
    from webapp.evaluator.artifacts import update_index

    s = client.stats
    execution = {
        "api_calls": s.api_calls,
        "cache_hits": s.cache_hits,
        "retries": s.retries,
        "rate_limited": s.rate_limited,
        "resumed": bool(resume),
    }
    update_index(prepared.options.output_dir, runner.index_entry(doc, stats=execution))
    rec = None
    if record and not aborted:
        # Recorded (committed) before the summary is printed: a reader that stops early loses nothing.
        from webapp.cli_support import cli_session
        from webapp.evaluator.service import RecordError, record_evaluation

        try:
            with cli_session(settings) as session:
                rec = record_evaluation(session=session, document=doc, spec=settings.eval_spec)
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
    return EXIT_OK if doc["status"] == "completed" else EXIT_NOT_COMPLETED


def _run_with_progress(prepared: Any, client: Any, total: int, console: Console) -> tuple[dict[str, Any], bool]:
    from webapp.evaluator import runner

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[usage]}"),
        console=console,
        transient=False,
    )

    def usage_text() -> str:
        s = client.stats
        cost = f"${s.cost_usd:.4f}" if s.cost_known else f"${s.cost_usd:.4f}+ (unpriced model)"
        return f"{s.prompt_tokens + s.completion_tokens:,} tokens {cost} · {s.api_calls} API calls"

    aborted = False
    with progress:
        task = progress.add_task("calls", total=total, usage=usage_text())

        def on_call() -> None:
            progress.update(task, advance=1, usage=usage_text())

        async def main() -> dict[str, Any]:
            try:
                return await runner.execute(prepared, client, on_call=on_call)
            finally:
                await client.close()

        try:
            doc = runner.run_async(main())
        except KeyboardInterrupt:
            aborted = True
            doc = prepared.document
    return doc, aborted


def _summary(console: Console, doc: dict[str, Any], prepared: Any, stats: Any) -> None:
    from rich.table import Table

    table = Table(title=f"run {doc['run_id']} — {doc['status']}", show_lines=False)
    table.add_column("metric")
    table.add_column("mean of means", justify="right")
    table.add_column("cases", justify="right")
    for name, v in doc["overall_metric_stats"].items():
        mom = "—" if v["mean_of_means"] is None else f"{v['mean_of_means']:.2f}"
        table.add_row(name, mom, str(v["num_cases"]))
    for name, v in doc["overall_flag_stats"].items():
        prop = "—" if v["true_proportion"] is None else f"{v['true_proportion']:.0%}"
        table.add_row(f"flag {name}", prop, f"{v['true_count']}/{v['total_count']}")
    console.print(table)
    for r in doc["test_case_results"]:
        for m in r["high_variance_metrics"]:
            s = r["per_metric_stats"][m]
            console.print(
                f"⚠ HIGH VARIABILITY {r['test_case_id']} {m}: mean={s['mean']:.2f} std={s['std']:.2f} "
                f"min={s['min']} max={s['max']}",
                highlight=False,
            )
    console.print(
        f"{stats.api_calls} API call(s), {stats.cache_hits} from cache, {stats.retries} retried; "
        f"artifacts: {prepared.run_dir / 'dataset_evaluation.json'}",
        highlight=False,
    )


app.command("evaluate-dataset")(evaluate_dataset)


def register(root: typer.Typer, import_app: typer.Typer) -> None:
    """Add `draftdesk evaluate-dataset`."""
    root.command("evaluate-dataset")(evaluate_dataset)


def main() -> None:
    """Entry point of the `prompt-evaluator` console script."""
    from webapp.cli_support import guard_stdout

    guard_stdout()
    app()


if __name__ == "__main__":
    main()
