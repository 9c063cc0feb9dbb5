"""Running a prepared evaluation: every sample generated and judged concurrently, artifacts kept current.

Samples run concurrently; a case's file is written as soon as its last sample finishes; every
finished sample is appended to the journal so `--resume` can pick up exactly where a killed run
stopped; Ctrl-C (cancellation) leaves the main artifact with status "aborted".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from webapp.datasets.loader import TestCase
from webapp.evaluator import aggregation
from webapp.evaluator.artifact_models import (
    CheckOutcome,
    DatasetEvaluation,
    JournalEntry,
    JudgeVerdict,
    Sample,
    SampleTokens,
    TestCaseResult,
    TokenCount,
)
from webapp.evaluator.artifacts import (
    JOURNAL,
    MAIN_ARTIFACT,
    Journal,
    case_file_names,
    encode_json,
    write_artifact,
    write_text_atomic,
)
from webapp.evaluator.cache import ResponseCache, default_cache_dir
from webapp.evaluator.client import Answer, ChatClient, LlmCallError, LlmConfigError, Price
from webapp.evaluator.judge_validation import judge_verdict
from webapp.evaluator.preparation import JUDGE_TEMPERATURE, EvalOptions, Prepared, reuses_cache, utc_timestamp
from webapp.evaluator.prompts import generator_messages, generator_seed, judge_messages, judge_seed
from webapp.evaluator.rubric import judge_response_format
from webapp.evaluator.support import DRAFT_RESPONSE_FORMAT, SupportDraft, parse_draft, run_draft_checks

T = TypeVar("T")
ARTIFACT_WRITE_INTERVAL_S = 1.0


@dataclass
class Runtime:
    """What the sample coroutines share."""

    prepared: Prepared
    client: ChatClient
    on_call: Callable[[], None] = lambda: None
    samples_started: int = 0  # whose generation got a place (or came from the cache)
    samples_finished: int = 0

    @property
    def samples_in_flight(self) -> int:
        """Return how many samples are being generated or judged right now."""
        return self.samples_started - self.samples_finished

    @property
    def options(self) -> EvalOptions:
        """Return the run's options."""
        return self.prepared.options


def _tokens(ans: Answer) -> TokenCount:
    return TokenCount(prompt=ans.prompt_tokens, completion=ans.completion_tokens)


def _sum_tokens(answers: list[Answer | None]) -> TokenCount | None:
    got = [a for a in answers if a is not None]
    if not got:
        return None
    return TokenCount(prompt=sum(a.prompt_tokens for a in got), completion=sum(a.completion_tokens for a in got))


def _sample_cost(rt: Runtime, gen: Answer | None, judges: list[Answer | None]) -> float | None:
    total = 0.0
    pairs = [(gen, rt.options.generator_model)] + [(j, rt.options.judge_model) for j in judges]
    for ans, model in pairs:
        if ans is None:
            continue
        c = rt.client.cost(model, ans.prompt_tokens, ans.completion_tokens)
        if c is None:
            return None
        total += c
    return round(total, 8)


async def run_sample(rt: Runtime, case: TestCase, index: int) -> Sample:
    """Generate and judge one sample; return its record (never raises for model failures)."""
    started = False

    def start() -> None:
        nonlocal started
        if not started:
            started = True
            rt.samples_started += 1

    try:
        return await _run_sample(rt, case, index, start)
    finally:
        if started:
            rt.samples_finished += 1


@dataclass(frozen=True)
class _Judgement:
    answer: Answer | None  # None when the judge call failed
    verdict: JudgeVerdict
    raw: str | None = None  # the answer, when it did not fit the rubric


async def _judge_once(rt: Runtime, case: TestCase, index: int, output_text: str, repeat: int) -> _Judgement:
    """Ask the judge once; return its answer and verdict."""
    p, o = rt.prepared, rt.options
    try:
        judge = await rt.client.complete(
            model=o.judge_model,
            messages=judge_messages(p, case, output_text),
            temperature=JUDGE_TEMPERATURE,
            seed=judge_seed(o.seed, repeat),
            sample_index=index,
            response_format=judge_response_format(p.rubric),
            priority=0,  # finish started samples before starting new ones
            repeat=repeat,
        )
    except LlmConfigError:
        raise
    except LlmCallError as exc:
        return _Judgement(None, JudgeVerdict(status="judge_error", error=f"judge: {exc}"))
    finally:
        rt.on_call()
    verdict = judge_verdict(judge.content, p.rubric)
    return _Judgement(judge, verdict, judge.content if verdict.status == "judge_invalid_response" else None)


def _skip_calls(rt: Runtime, n: int) -> None:
    # Calls that will not happen still count as done, so the progress figures add up.
    for _ in range(n):
        rt.on_call()


async def _run_sample(rt: Runtime, case: TestCase, index: int, start: Callable[[], None]) -> Sample:
    p, o = rt.prepared, rt.options
    sample = Sample(sample_index=index)
    try:
        gen = await rt.client.complete(
            model=o.generator_model,
            messages=generator_messages(p, case),
            temperature=o.temperature,
            seed=generator_seed(o.seed, index),
            sample_index=index,
            response_format=DRAFT_RESPONSE_FORMAT if p.support else None,
            on_start=start,
        )
    except LlmConfigError:
        raise  # every call would fail the same way: stop the run
    except LlmCallError as exc:
        _skip_calls(rt, 1 + o.judge_repeats)  # the judge calls will not happen either
        sample.status, sample.error = "generation_error", f"generator: {exc}"
        return sample
    rt.on_call()
    output_text = gen.content
    draft: SupportDraft | None = None
    if p.support:
        try:
            draft = parse_draft(gen.content)
        except ValueError as exc:
            _skip_calls(rt, o.judge_repeats)
            sample.status, sample.generator_output, sample.error = "generation_error", gen.content, str(exc)
            sample.tokens = SampleTokens(generator=_tokens(gen))
            sample.cost_usd = _sample_cost(rt, gen, [])
            return sample
        output_text = draft.text_for_judge()
    sample.generator_output = draft.raw if draft is not None else gen.content
    judged = await asyncio.gather(*(_judge_once(rt, case, index, output_text, r) for r in range(o.judge_repeats)))
    answers = [j.answer for j in judged]
    first = judged[0]
    sample.tokens = SampleTokens(generator=_tokens(gen), judge=_sum_tokens(answers))
    sample.cost_usd = _sample_cost(rt, gen, answers)
    if o.judge_repeats > 1:
        # Every judgement, the first included; the sample's scores are the first one's (see docs/evaluator.md).
        sample.judge_repeats = [j.verdict for j in judged]
    if first.verdict.status != "completed":
        sample.status, sample.error = first.verdict.status, first.verdict.error
        if first.raw is not None:
            sample.judge_raw = first.raw
        return sample
    flags = dict(first.verdict.flags or {})
    if p.rubric.spec.automated_checks:
        assert p.kb is not None and p.spec is not None and draft is not None  # automated_checks needs support_draft
        results = run_draft_checks(draft=draft, case=case, kb=p.kb.snapshot, spec=p.spec)
        sample.checks = [CheckOutcome(key=r.key, status=r.status, reason=r.reason) for r in results]
        by_key = {r.key: r for r in results}
        for name in p.rubric.check_flags:
            r = by_key.get(name.removeprefix("check_"))
            flags[name] = bool(r is not None and r.failed)
    sample.status = "completed"
    sample.judge_scores = first.verdict.judge_scores
    sample.flags = flags
    sample.judge_rationale = first.verdict.judge_rationale
    return sample


def planned_calls(p: Prepared, client: ChatClient) -> tuple[int, int]:
    """Return (calls the run needs, of which answered by the cache) for the samples still to do."""
    total = cached = 0
    o = p.options
    for case in p.cases:
        gen_msgs = generator_messages(p, case)
        for i in range(o.num_samples):
            if (case.id, i) in p.done:
                continue
            total += 1 + o.judge_repeats
            ans = client.cached_answer(
                model=o.generator_model,
                messages=gen_msgs,
                temperature=o.temperature,
                seed=generator_seed(o.seed, i),
                sample_index=i,
                response_format=DRAFT_RESPONSE_FORMAT if p.support else None,
            )
            if ans is None:
                continue
            cached += 1
            text = ans.content
            if p.support:
                try:
                    text = parse_draft(ans.content).text_for_judge()
                except ValueError:
                    cached += o.judge_repeats  # no judge call will be made for a malformed draft
                    continue
            judge_msgs = judge_messages(p, case, text)
            for r in range(o.judge_repeats):
                if client.is_cached(
                    model=o.judge_model,
                    messages=judge_msgs,
                    temperature=JUDGE_TEMPERATURE,
                    seed=judge_seed(o.seed, r),
                    sample_index=i,
                    response_format=judge_response_format(p.rubric),
                    repeat=r,
                ):
                    cached += 1
    return total, cached


def run_async(main: Coroutine[object, None, T]) -> T:
    """Run a coroutine to completion, on uvloop when it is installed (uvicorn[standard] brings it).

    uvloop trims the per-request overhead of the event loop, which shows at high concurrency.
    Ctrl-C cancels the coroutine and raises KeyboardInterrupt, as with asyncio.run.
    """
    try:  # an optional dependency, looked up only when a run starts
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # e.g. on Windows: the standard loop works the same, a little slower
        factory = None
    with asyncio.Runner(loop_factory=factory) as loop_runner:
        return loop_runner.run(main)


def make_client(
    options: EvalOptions, prices: dict[str, Price], *, max_attempts: int = 6, backoff_base: float = 0.5
) -> ChatClient:
    """Build the chat client with the run's cache folder (unless --no-cache) and prices."""
    cache = None
    if options.use_cache:
        cache = ResponseCache(default_cache_dir(options.cache_dir))
    return ChatClient(
        base_url=options.base_url,
        api_key=options.api_key,
        concurrency=options.concurrency,
        cache=cache,
        reuse_cache=reuses_cache(options),
        prices=prices,
        max_attempts=max_attempts,
        backoff_base=backoff_base,
    )


def _restore_finished(p: Prepared, results: dict[str, TestCaseResult], file_names: dict[str, str]) -> dict[str, int]:
    """Put the journal's finished samples back, write the files of cases already complete; return samples left per case."""
    remaining: dict[str, int] = {}
    for case in p.cases:
        result = results[case.id]
        for i in range(p.options.num_samples):
            done = p.done.get((case.id, i))
            if done is not None:
                result.samples[i] = done
        remaining[case.id] = sum(1 for s in result.samples if s.status == "pending")
        if remaining[case.id] == 0:
            aggregation.finish_case(result, p.rubric)
            write_artifact(p.run_dir / file_names[case.id], result)
    return remaining


class _Run:
    """One invocation's state while samples finish: the case results, what is left, the journal and writes in flight."""

    def __init__(self, rt: Runtime, on_case: Callable[[TestCaseResult], None]) -> None:
        p = rt.prepared
        self.rt, self.p, self.doc, self.on_case = rt, p, p.document, on_case
        self.results = {r.test_case_id: r for r in p.document.test_case_results}
        self.file_names = case_file_names(case.id for case in p.cases)
        self.remaining = _restore_finished(p, self.results, self.file_names)
        aggregation.finish_document(self.doc, p.rubric)
        self.doc.status = "running"
        write_artifact(p.run_dir / MAIN_ARTIFACT, self.doc)
        self.journal = Journal(p.run_dir / JOURNAL)
        self.last_write = time.monotonic()
        self.writes: set[asyncio.Future[None]] = set()

    async def write_off_loop(self, path: Path, text: str) -> None:
        # Encoding happens here on the loop; the write and its fsync run in a thread so they never
        # stall calls in flight. Each case file is written once, so no two writes race. Shielded:
        # a Ctrl-C while the write waits for a thread must not drop it (the case is already
        # marked completed in the document), and the abort below waits for it.
        write = asyncio.ensure_future(asyncio.to_thread(write_text_atomic, path, text))
        self.writes.add(write)
        write.add_done_callback(self.writes.discard)
        await asyncio.shield(write)

    async def one(self, case: TestCase, index: int) -> None:
        """Run one sample, journal it, and finish its case when it was the last one."""
        p, doc = self.p, self.doc
        sample = await run_sample(self.rt, case, index)
        result = self.results[case.id]
        result.samples[index] = sample
        self.journal.append(JournalEntry(case_id=case.id, sample=sample))
        self.remaining[case.id] -= 1
        if self.remaining[case.id] == 0:
            aggregation.finish_case(result, p.rubric)
            self.on_case(result)
            await self.write_off_loop(p.run_dir / self.file_names[case.id], encode_json(result.to_json_dict()))
            # The main artifact is rewritten at most once a second while running: it grows with
            # the run, and the case files already hold each finished case. It is written here on
            # the loop (compact, no fsync: the final write is durable) so that no snapshot can
            # land after the final or the aborted one.
            if time.monotonic() - self.last_write >= ARTIFACT_WRITE_INTERVAL_S:
                self.last_write = time.monotonic()
                aggregation.finish_document(doc, p.rubric)
                doc.cache = self.rt.client.cache_report()
                write_artifact(p.run_dir / MAIN_ARTIFACT, doc, pretty=False, durable=False)

    async def abort(self, tasks: Sequence[asyncio.Future[None]]) -> None:
        """Cancel the samples in flight, wait for the case files being written, write the document "aborted"."""
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # every case the document calls completed has its file (a cancelled case's write went on)
        await asyncio.gather(*self.writes, return_exceptions=True)
        aggregation.finish_document(self.doc, self.p.rubric, aborted=True)
        self.doc.cache = self.rt.client.cache_report()
        write_artifact(self.p.run_dir / MAIN_ARTIFACT, self.doc)
        self.journal.close()

    def finish(self) -> DatasetEvaluation:
        """Write the final document (durable) and return it."""
        self.journal.close()
        aggregation.finish_document(self.doc, self.p.rubric)
        self.doc.cache = self.rt.client.cache_report()
        self.doc.timestamp_end = utc_timestamp()
        write_artifact(self.p.run_dir / MAIN_ARTIFACT, self.doc)
        return self.doc


async def execute(
    p: Prepared,
    client: ChatClient,
    *,
    on_call: Callable[[], None] = lambda: None,
    on_case: Callable[[TestCaseResult], None] = lambda result: None,
    on_start: Callable[[Runtime], None] = lambda rt: None,
) -> DatasetEvaluation:
    """Run every remaining sample, stream the case files and keep the artifacts current; return the document.

    `on_call` follows every call, `on_case` every case finished in this invocation, and
    `on_start` gets the runtime (samples in flight) before the first call. If the task is
    cancelled (Ctrl-C), the document is written with status "aborted" and the cancellation is re-raised.
    """
    p.run_dir.mkdir(parents=True, exist_ok=True)
    rt = Runtime(prepared=p, client=client, on_call=on_call)
    on_start(rt)
    run = _Run(rt, on_case)
    tasks = [
        asyncio.ensure_future(run.one(case, i))
        for case in p.cases
        for i in range(p.options.num_samples)
        if run.results[case.id].samples[i].status == "pending"
    ]
    try:
        if tasks:
            await asyncio.gather(*tasks)
    except BaseException:  # Ctrl-C (cancellation), a refused key, or a bug: leave valid, resumable artifacts
        await run.abort(tasks)
        raise
    return run.finish()
