"""`prompt-evaluator judge-run RUN`: the judge pass over a run's drafts (webapp.ppi.judge_pass), with a progress bar.

It is a command of `prompt-evaluator` (registered in prompt_evaluator/cli.py) because it runs
prompt-evaluator's judge, with the same model, endpoint and cache options as `evaluate-dataset`;
the code is PPI's, since the evaluator domain does not import PPI (tests/test_dependencies.py).
Heavy modules (the openai SDK, SQLModel, the services) load when the command runs, not when
`prompt-evaluator --help` is printed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from webapp.core.cli_support import cli_session, load_settings

if TYPE_CHECKING:
    from webapp.core.config import Settings
    from webapp.evaluator.client import ChatClient
    from webapp.ppi.judge_pass import JudgeOutcome, JudgePlan, JudgeSetup
    from webapp.ppi.service import JudgeScoreIn

EXIT_OK, EXIT_FAILED_DRAFTS, EXIT_USAGE = 0, 1, 2
API_KEY_SETTING = "OPENAI_API_KEY"
SECOND_API_KEY_SETTING = "SECOND_JUDGE_API_KEY"  # the second judge's key when its provider differs (else OPENAI_API_KEY)
DEFAULT_CALLS = 5  # primary judge calls per draft: with a second judge, 6 calls per draft (issue 35: at most 7)


def _err(message: str) -> typer.Exit:
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True, markup=True)
    return typer.Exit(EXIT_USAGE)


def judge_run(
    run: str = typer.Argument(..., metavar="RUN", help="Run name (or id) whose drafts the judge scores"),
    judge_model: str = typer.Option("gpt-4o-mini", "--judge-model", help="Model that scores the drafts"),
    rubric: str = typer.Option("support-draft", "--rubric", help="Built-in rubric or a YAML file with the four criteria"),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible API URL (else OPENAI_BASE_URL)"),
    concurrency: int = typer.Option(8, "--concurrency", help="Requests in flight at most"),
    seed: int | None = typer.Option(
        None, "--seed", help="Seed of the judge calls: call i sends seed + i (part of the judge version)"
    ),
    judge_calls: int = typer.Option(DEFAULT_CALLS, "--judge-calls", help="Calls of the judge per draft (1: one call at temperature 0)"),
    judge_temperature: float | None = typer.Option(
        None, "--judge-temperature", help="Temperature of the judge's calls (default 0.7 with several calls, 0 with one)"
    ),
    second_judge_model: str | None = typer.Option(
        None, "--second-judge-model", help="A second judge model, same rubric, called once per draft (default: none)"
    ),
    second_judge_base_url: str | None = typer.Option(
        None, "--second-judge-base-url", help=f"The second judge's API URL when its provider differs (key: ${SECOND_API_KEY_SETTING})"
    ),
    judge_logprobs: bool | None = typer.Option(
        None, "--judge-logprobs/--no-judge-logprobs", help="Ask log-probs on the first call (default: on with several calls)"
    ),
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
    if second_judge_base_url and not second_judge_model:
        raise _err("--second-judge-base-url: give --second-judge-model too")
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = os.environ.get(API_KEY_SETTING) or None
    if api_key is None and url is None:
        raise _err(
            f"{API_KEY_SETTING} is not set: the judge calls the OpenAI API with it "
            "(set it, or give --base-url for an endpoint that needs no key)"
        )
    from webapp.ppi.judge_pass import JudgeSetup
    from webapp.ppi.service import PpiError

    console = Console()
    settings = load_settings()
    try:
        setup = JudgeSetup.of(
            calls=judge_calls, temperature=judge_temperature, second_model=second_judge_model, logprobs=judge_logprobs
        )
    except PpiError as exc:
        raise _err(_as_flag(str(exc))) from exc
    plan = _plan(settings, run=run, model=judge_model, rubric=rubric, seed=seed, setup=setup)
    console.print(
        f"run [bold]{plan.run_name}[/]: {plan.gradable} gradable draft(s), {plan.already_scored} already scored by "
        f"judge {plan.version!r}; [bold]{len(plan.requests)}[/] to judge",
        highlight=False,
        soft_wrap=True,
    )
    if not plan.requests:
        console.print("nothing to do: every gradable draft has a score from this judge version", highlight=False)
        raise typer.Exit(EXIT_OK)
    options = _ClientOptions(concurrency, cache, no_cache, cache_dir, reuse=cache or seed is not None)
    client = _client(settings, options, url, api_key)
    second = None
    if second_judge_base_url:
        second = _client(settings, options, second_judge_base_url, os.environ.get(SECOND_API_KEY_SETTING) or api_key)
    outcome = _judge(plan, client, second, settings.database_url, console, quiet=quiet)
    _summary(console, plan, outcome, [client] if second is None else [client, second])
    raise typer.Exit(EXIT_FAILED_DRAFTS if outcome.failures else EXIT_OK)


def _plan(settings: Settings, *, run: str, model: str, rubric: str, seed: int | None, setup: JudgeSetup) -> JudgePlan:
    """Load the rubric and plan the pass; a bad flag or run exits 2 naming it."""
    from webapp.evaluator.client import load_prices
    from webapp.evaluator.rubric import RubricError, load_rubric
    from webapp.ppi.judge_pass import plan_judge_pass
    from webapp.ppi.service import PpiError

    try:
        loaded = load_rubric(rubric)
        load_prices(settings.evaluator_prices)  # a broken prices file is refused before any call
        with cli_session(settings) as session:
            return plan_judge_pass(session=session, run_ref=run, model=model, rubric=loaded, seed=seed, setup=setup)
    except RubricError as exc:
        raise _err(f"--rubric: {exc}") from exc
    except (PpiError, ValueError) as exc:
        raise _err(_as_flag(str(exc))) from exc


@dataclass(frozen=True)
class _ClientOptions:
    concurrency: int
    cache: bool
    no_cache: bool
    cache_dir: Path | None
    reuse: bool


def _client(settings: Settings, options: _ClientOptions, url: str | None, api_key: str | None) -> ChatClient:
    """The evaluator's client for one endpoint, with the answer cache and the prices."""
    from webapp.evaluator.cache import ResponseCache, default_cache_dir
    from webapp.evaluator.client import ChatClient, load_prices

    return ChatClient(
        base_url=url,
        api_key=api_key,
        concurrency=options.concurrency,
        cache=None if options.no_cache else ResponseCache(default_cache_dir(options.cache_dir)),
        # As evaluate-dataset: answers are written, and read back only with --cache or --seed, so a
        # rerun after a bad answer asks the judge again.
        reuse_cache=options.reuse,
        prices=load_prices(settings.evaluator_prices),
    )


def _judge(
    plan: JudgePlan, client: ChatClient, second: ChatClient | None, database_url: str, console: Console, *, quiet: bool
) -> JudgeOutcome:
    """Run the pass; a refused endpoint or batch exits 2, Ctrl-C exits 1, each saying what is kept."""
    from sqlalchemy.exc import IntegrityError

    from webapp.evaluator.client import LlmConfigError
    from webapp.ppi.service import PpiError

    try:
        return _run_with_progress(plan, client, second, database_url, console, quiet=quiet)
    except LlmConfigError as exc:
        raise _err(f"the API refused the judge: {exc}. Scores finished before it are stored; rerun to go on") from exc
    except (PpiError, IntegrityError) as exc:
        # A batch refused whole, e.g. a second pass on the same run stored these drafts meanwhile.
        detail = str(exc) if isinstance(exc, PpiError) else "a score of this judge version already exists for a draft"
        raise _err(f"{detail}; the batches stored before it are kept; rerun to judge what is missing") from exc
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: the scores finished so far are stored; rerun to go on", highlight=False)
        raise typer.Exit(EXIT_FAILED_DRAFTS) from None


_FLAGS = {
    "judge_calls:": "--judge-calls:",
    "judge_temperature:": "--judge-temperature:",
    "second_judge_model:": "--second-judge-model:",
    "judge_model:": "--judge-model:",
}


def _as_flag(message: str) -> str:
    """Name the command's flag where the service names its field (judge_calls: -> --judge-calls:)."""
    for field, flag in _FLAGS.items():
        if message.startswith(field):
            return flag + message[len(field) :]
    return message


def _run_with_progress(
    plan: JudgePlan, client: ChatClient, second: ChatClient | None, database_url: str, console: Console, *, quiet: bool
) -> JudgeOutcome:
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
            return await judge_drafts(plan=plan, client=client, store=store, on_done=on_done, second_client=second)
        finally:
            await client.close()
            if second is not None:
                await second.close()

    try:
        with progress:
            return run_async(main())
    finally:
        engine.dispose()


def _summary(console: Console, plan: JudgePlan, outcome: JudgeOutcome, clients: list[ChatClient]) -> None:
    api_calls = sum(c.stats.api_calls for c in clients)
    cache_hits = sum(c.stats.cache_hits for c in clients)
    retries = sum(c.stats.retries for c in clients)
    spent = sum(c.stats.cost_usd for c in clients)
    cost = f"${spent:.4f}{'' if all(c.stats.cost_known for c in clients) else '+'}"
    console.print(
        f"judged {len(outcome.scored)} of {len(plan.requests)} draft(s) of run {plan.run_name!r}; "
        f"{len(outcome.failures)} failed; {plan.already_scored} were already scored",
        highlight=False,
        soft_wrap=True,
    )
    for f in outcome.failures:
        console.print(f"  draft {f.draft_id} (case {f.case_id}): {f.error}", highlight=False, soft_wrap=True, markup=False)
    console.print(
        f"{api_calls} API call(s), {cache_hits} from cache, {retries} retried; cost {cost}; "
        f"cache: {clients[0].cache_report()}",
        highlight=False,
    )
    console.print(per_draft_line(plan, outcome), highlight=False, soft_wrap=True, markup=False)
    console.print(f"judge version: {plan.version}", highlight=False, soft_wrap=True, markup=False)
    if outcome.failures:
        console.print("rerun the command to judge the failed drafts again (scored drafts are skipped)", highlight=False)
    else:
        console.print(
            "every gradable draft is scored: draw the sample with this judge version (docs/ppi.md)", highlight=False
        )


def per_draft_line(plan: JudgePlan, outcome: JudgeOutcome) -> str:
    """Say what the judge costs per draft: the calls of the setup, the calls made and the dollars per scored draft."""
    setup = plan.setup
    parts = f"{setup.calls} judge call(s)" + (f" + 1 second judge ({setup.second_model})" if setup.second_model else "")
    line = f"per draft: {setup.calls_per_draft()} calls ({parts}, temperature {setup.temperature:g})"
    if not outcome.scored:
        return line
    made = sum(s.calls for s in outcome.scored) / len(outcome.scored)
    costs = [s.cost_usd for s in outcome.scored]
    known = [c for c in costs if c is not None]
    if len(known) == len(costs):
        dollars = f"${sum(known) / len(known):.5f} per draft"
    else:
        dollars = "cost per draft unknown (a judge model has no price in DRAFTDESK_EVALUATOR_PRICES)"
    return f"{line}; {made:.2f} calls made per scored draft; {dollars}"
