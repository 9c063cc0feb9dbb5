"""`prompt-evaluator evaluate-dataset` (also `draftdesk evaluate-dataset`): dataset-driven evaluation."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from webapp.core.cli_support import guard_stdout

if TYPE_CHECKING:

    pass

app = typer.Typer(help="Prompt Evaluator: dataset-driven evaluation with a generator and an LLM judge.", no_args_is_help=True)

EXIT_USAGE = 2


@app.callback()
def _root() -> None:
    """Prompt Evaluator."""


def _err(message: str) -> typer.Exit:
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_USAGE)


def _checked_flags(
    *, quick: bool, num_samples: int | None, cache: bool, no_cache: bool, case_ids: str | None
) -> tuple[int | None, list[str] | None]:
    """Refuse conflicting flags; return the samples per case (2 with --quick) and the --case-ids list."""
    if quick and num_samples is not None:
        raise _err("--quick and --num-samples/-n cannot be combined: --quick means 2 samples per case")
    if cache and no_cache:
        raise _err("--cache and --no-cache cannot be combined")
    ids = [i.strip() for i in case_ids.split(",") if i.strip()] if case_ids else None
    if case_ids is not None and not ids:
        raise _err("--case-ids: give at least one test case id")
    return (2 if quick else num_samples), ids


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
    record: bool = typer.Option(False, "--record", help="Store the run in the Draft Desk database (or on --url's server)"),
    url: str | None = typer.Option(
        None, "--url", help="With --record: record over this server's API, not the local database (default: DRAFTDESK_URL)"
    ),
    token: str | None = typer.Option(None, "--token", help="With --url: a `ci` token (default: DRAFTDESK_TOKEN; never printed)"),
    fail_on_verdict: bool = typer.Option(
        False, "--fail-on-verdict", help="With --url: exit 1 when the recorded run's checks fail (else the verdict is only printed)"
    ),
    description: str = typer.Option("", "--description", help="A note kept with the run in runs/index.json"),
) -> None:
    """Evaluate a system prompt over every test case of a dataset, N samples each, scored by an LLM judge."""
    num_samples, ids = _checked_flags(quick=quick, num_samples=num_samples, cache=cache, no_cache=no_cache, case_ids=case_ids)
    from webapp.evaluator.command import RemoteTarget, UsageError, run_command
    from webapp.evaluator.preparation import EvalOptions, EvaluationError, check_options

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
    if url is not None and not record:
        raise _err("--url goes with --record (it says where the run is recorded)")
    url = url or os.environ.get("DRAFTDESK_URL") or None
    if url is None and (token is not None or fail_on_verdict):
        raise _err("--token and --fail-on-verdict go with --url (or DRAFTDESK_URL)")
    remote = RemoteTarget(url, token, fail_on_verdict) if url is not None else None
    try:
        if resume is None:
            check_options(options)  # before anything is read, so the flag is named first
        raise typer.Exit(run_command(options, resume=resume, record=record, quiet=quiet, remote=remote))
    except (EvaluationError, UsageError) as exc:
        raise _err(str(exc)) from exc


app.command("evaluate-dataset")(evaluate_dataset)

cache_app = typer.Typer(help="The answer cache shared by every run (see `cache info`).", no_args_is_help=True)
app.add_typer(cache_app, name="cache")
CACHE_DIR_OPTION = typer.Option(
    None, "--cache-dir", help="Answer cache folder (else $PROMPT_EVALUATOR_CACHE_DIR, else the user cache dir)"
)


@cache_app.command("info")
def cache_info(cache_dir: Path | None = CACHE_DIR_OPTION) -> None:
    """Show where the answer cache is, how many answers it holds and their size."""
    from webapp.evaluator.cache import ResponseCache, default_cache_dir

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
    from webapp.evaluator.cache import ResponseCache, default_cache_dir, parse_age

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
