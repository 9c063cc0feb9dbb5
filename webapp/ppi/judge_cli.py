"""`prompt-evaluator judge-run RUN`: the judge pass over a run's drafts (webapp.ppi.judge_pass), with a progress bar.

It is a command of `prompt-evaluator` (registered in prompt_evaluator/cli.py) because it runs
prompt-evaluator's judge, with the same model, endpoint and cache options as `evaluate-dataset`;
the code is PPI's, since the evaluator domain does not import PPI (tests/test_dependencies.py).
Heavy modules (the openai SDK, SQLModel, the services) load when the command runs, not when
`prompt-evaluator --help` is printed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from webapp.core.cli_support import cli_session, load_settings

if TYPE_CHECKING:
    from webapp.evaluator.client import ChatClient
    from webapp.ppi.judge_pass import JudgeOutcome, JudgePlan
    from webapp.ppi.service import JudgeScoreIn

EXIT_OK, EXIT_FAILED_DRAFTS, EXIT_USAGE = 0, 1, 2
API_KEY_SETTING = "OPENAI_API_KEY"


def _err(message: str) -> typer.Exit:
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True, markup=True)
    return typer.Exit(EXIT_USAGE)


def judge_run(
    run: str = typer.Argument(..., metavar="RUN", help="Run name (or id) whose drafts the judge scores"),
    judge_model: str = typer.Option("gpt-4o-mini", "--judge-model", help="Model that scores the drafts"),
    rubric: str = typer.Option("support-draft", "--rubric", help="Built-in rubric or a YAML file with the four criteria"),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible API URL (else OPENAI_BASE_URL)"),
    concurrency: int = typer.Option(8, "--concurrency", help="Requests in flight at most"),
    seed: int | None = typer.Option(None, "--seed", help="Seed sent with every judge call (part of the judge version)"),
    cache: bool = typer.Option(False, "--cache", help="Reuse cached answers even without --seed"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the answer cache"),
    cache_dir: Path | None = typer.Option(
        None, "--cache-dir", help="Answer cache folder (else $PROMPT_EVALUATOR_CACHE_DIR, else the user cache dir)"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar"),
) -> None:
    """Score every gradable draft of a recorded run with the LLM judge and store the scores for PPI (skips drafts already scored)."""
    if cache and no_cache:
        raise _err("--cache and --no-cache cannot be combined")
    if concurrency < 1:
        raise _err("--concurrency must be at least 1")
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = os.environ.get(API_KEY_SETTING) or None
    if api_key is None and url is None:
        raise _err(
            f"{API_KEY_SETTING} is not set: the judge calls the OpenAI API with it "
            "(set it, or give --base-url for an endpoint that needs no key)"
        )
    from sqlalchemy.exc import IntegrityError

    from webapp.evaluator.cache import ResponseCache, default_cache_dir
    from webapp.evaluator.client import ChatClient, LlmConfigError, load_prices
    from webapp.evaluator.rubric import RubricError, load_rubric
    from webapp.ppi.judge_pass import plan_judge_pass
    from webapp.ppi.service import PpiError

    console = Console()
    settings = load_settings()
    try:
        loaded = load_rubric(rubric)
        prices = load_prices(settings.evaluator_prices)
        with cli_session(settings) as session:
            plan = plan_judge_pass(session=session, run_ref=run, model=judge_model, rubric=loaded, seed=seed)
    except RubricError as exc:
        raise _err(f"--rubric: {exc}") from exc
    except (PpiError, ValueError) as exc:
        raise _err(str(exc)) from exc
    console.print(
        f"run [bold]{plan.run_name}[/]: {plan.gradable} gradable draft(s), {plan.already_scored} already scored by "
        f"judge {plan.version!r}; [bold]{len(plan.requests)}[/] to judge",
        highlight=False,
        soft_wrap=True,
    )
    if not plan.requests:
        console.print("nothing to do: every gradable draft has a score from this judge version", highlight=False)
        raise typer.Exit(EXIT_OK)
    client = ChatClient(
        base_url=url,
        api_key=api_key,
        concurrency=concurrency,
        cache=None if no_cache else ResponseCache(default_cache_dir(cache_dir)),
        # As evaluate-dataset: answers are written, and read back only with --cache or --seed, so a
        # rerun after a bad answer asks the judge again.
        reuse_cache=cache or seed is not None,
        prices=prices,
    )
    try:
        outcome = _run_with_progress(plan, client, settings.database_url, console, quiet=quiet)
    except LlmConfigError as exc:
        raise _err(f"the API refused the judge: {exc}. Scores finished before it are stored; rerun to go on") from exc
    except (PpiError, IntegrityError) as exc:
        # A batch refused whole, e.g. a second pass on the same run stored these drafts meanwhile.
        detail = str(exc) if isinstance(exc, PpiError) else "a score of this judge version already exists for a draft"
        raise _err(f"{detail}; the batches stored before it are kept; rerun to judge what is missing") from exc
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: the scores finished so far are stored; rerun to go on", highlight=False)
        raise typer.Exit(EXIT_FAILED_DRAFTS) from None
    _summary(console, plan, outcome, client)
    raise typer.Exit(EXIT_FAILED_DRAFTS if outcome.failures else EXIT_OK)


def _run_with_progress(plan: JudgePlan, client: ChatClient, database_url: str, console: Console, *, quiet: bool) -> JudgeOutcome:
    from webapp.core.db import make_engine, session_scope
    from webapp.evaluator.execution import run_async
    from webapp.ppi.judge_pass import judge_drafts, store_judgements

    engine = make_engine(database_url)
    counts = {"failed": 0}
    progress = Progress(
        TextColumn("[bold]drafts"),
        BarColumn(bar_width=30),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[failed]} failed"),
        console=console,
        transient=False,
        disable=quiet or not console.is_terminal,
    )
    task = progress.add_task("judge", total=len(plan.requests), failed=0)

    def store(scores: list[JudgeScoreIn]) -> None:
        with session_scope(engine) as session:  # one transaction per batch: a batch is stored whole or not at all
            store_judgements(session=session, plan=plan, scores=scores)

    def on_done(draft_id: int, ok: bool) -> None:
        if not ok:
            counts["failed"] += 1
        progress.update(task, advance=1, failed=counts["failed"])

    async def main() -> JudgeOutcome:
        try:
            return await judge_drafts(plan=plan, client=client, store=store, on_done=on_done)
        finally:
            await client.close()

    try:
        with progress:
            return run_async(main())
    finally:
        engine.dispose()


def _summary(console: Console, plan: JudgePlan, outcome: JudgeOutcome, client: ChatClient) -> None:
    s = client.stats
    cost = f"${s.cost_usd:.4f}{'' if s.cost_known else '+'}"
    console.print(
        f"judged {len(outcome.scored)} of {len(plan.requests)} draft(s) of run {plan.run_name!r}; "
        f"{len(outcome.failures)} failed; {plan.already_scored} were already scored",
        highlight=False,
        soft_wrap=True,
    )
    for f in outcome.failures:
        console.print(f"  draft {f.draft_id} (case {f.case_id}): {f.error}", highlight=False, soft_wrap=True, markup=False)
    console.print(
        f"{s.api_calls} API call(s), {s.cache_hits} from cache, {s.retries} retried; cost {cost}; "
        f"cache: {client.cache_report()}",
        highlight=False,
    )
    console.print(f"judge version: {plan.version}", highlight=False, soft_wrap=True, markup=False)
    if outcome.failures:
        console.print("rerun the command to judge the failed drafts again (scored drafts are skipped)", highlight=False)
    else:
        console.print(
            "every gradable draft is scored: draw the sample with this judge version (docs/ppi.md)", highlight=False
        )
