"""Run a dataset evaluation: generate N samples per case, judge each, aggregate, write artifacts.

Everything the run needs is prepared (and validated) before the first call, so a bad dataset,
rubric, prompt or KB file stops the command with exit 2 and nothing written. Samples run
concurrently; a case's file is written as soon as its last sample finishes; every finished
sample is appended to a journal so `--resume` can pick up exactly where a killed run stopped.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import jsonschema

from webapp.datasets.loader import DatasetError, SupportFieldError, TestCase, load_dataset
from webapp.evaluator import stats as st
from webapp.evaluator.artifacts import (
    JOURNAL,
    MAIN_ARTIFACT,
    Journal,
    case_file_name,
    encode_json,
    read_json,
    write_json_atomic,
    write_text_atomic,
)
from webapp.evaluator.cache import ResponseCache, default_cache_dir
from webapp.evaluator.client import Answer, ChatClient, LlmCallError, LlmConfigError, Price
from webapp.evaluator.rubric import (
    Rubric,
    RubricError,
    judge_instructions,
    judge_response_format,
    judge_schema,
    load_rubric,
)
from webapp.evaluator.support import (
    DRAFT_RESPONSE_FORMAT,
    KbContext,
    KbLoadError,
    draft_text_for_judge,
    generator_user_message,
    parse_draft,
    run_draft_checks,
    validate_support_cases,
)
from webapp.safe_input import loads_json
from webapp.spec import EvalSpec

T = TypeVar("T")
SAMPLE_STATUSES = ("completed", "judge_error", "judge_invalid_response", "generation_error", "pending")
RUN_STATUSES = ("completed", "partial", "failed", "running", "aborted")
JUDGE_TEMPERATURE = 0.0
ARTIFACT_WRITE_INTERVAL_S = 1.0


class EvaluationError(ValueError):
    """A usage or validation error found before any call (exit 2)."""


@dataclass
class EvalOptions:
    """The command's settings (the guide's flags and ours)."""

    dataset: Path
    system_prompt: Path
    num_samples: int = 5
    case_ids: list[str] | None = None
    max_cases: int | None = None
    rubric: str = "default"
    temperature: float = 0.7
    seed: int | None = None
    output_dir: Path = Path("runs")
    generator_model: str = "gpt-4o-mini"
    judge_model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str | None = None
    concurrency: int = 8
    use_cache: bool = True
    reuse_cache: bool = False  # --cache: reuse cached answers even without --seed
    cache_dir: Path | None = None
    judge_repeats: int = 1
    kb: Path | None = None
    description: str = ""


@dataclass
class Prepared:
    """Everything loaded and validated: the run can start."""

    options: EvalOptions
    cases: list[TestCase]
    dataset_meta: dict[str, Any]
    rubric: Rubric
    system_prompt: str
    system_prompt_hash: str
    kb: KbContext | None
    spec: EvalSpec | None
    run_id: str
    run_dir: Path
    document: dict[str, Any]
    done: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)  # restored completed samples


def reuses_cache(options: EvalOptions) -> bool:
    """Tell whether cached answers are reused: only when asked for (--cache) or reproducible by request (--seed)."""
    return options.use_cache and (options.reuse_cache or options.seed is not None)


def cache_mode(options: EvalOptions) -> str:
    """Return the artifact's `cache` value before the run: "off", "fresh", or "reused 0 of 0" (counted as it runs)."""
    if not options.use_cache:
        return "off"
    return "reused 0 of 0" if reuses_cache(options) else "fresh"


def _utc() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def select_cases(cases: list[TestCase], case_ids: list[str] | None, max_cases: int | None) -> list[TestCase]:
    """Filter cases to --case-ids (dataset order kept), then keep the first --max-cases; raise on unknown ids."""
    selected = cases
    if case_ids:
        known = {c.id for c in cases}
        missing = [i for i in case_ids if i not in known]
        if missing:
            raise EvaluationError(f"--case-ids: no test case with id {', '.join(repr(m) for m in missing)} in the dataset")
        wanted = set(case_ids)
        selected = [c for c in cases if c.id in wanted]
    if max_cases is not None:
        if max_cases < 1:
            raise EvaluationError(f"--max-cases must be at least 1 (got {max_cases})")
        selected = selected[:max_cases]
    return selected


TEMPERATURE_RANGE = (0.0, 2.0)  # what the Chat Completions API accepts


def check_options(options: EvalOptions) -> None:
    """Refuse impossible numeric flags with a usage error naming the flag."""
    if options.num_samples < 1:
        raise EvaluationError(f"--num-samples must be at least 1 (got {options.num_samples})")
    if options.max_cases is not None and options.max_cases < 1:
        raise EvaluationError(f"--max-cases must be at least 1 (got {options.max_cases})")
    lo, hi = TEMPERATURE_RANGE
    if not lo <= options.temperature <= hi:
        raise EvaluationError(f"--temperature must be between {lo:g} and {hi:g} (got {options.temperature:g})")
    if options.concurrency < 1:
        raise EvaluationError(f"--concurrency must be at least 1 (got {options.concurrency})")
    if options.judge_repeats < 1:
        raise EvaluationError(f"--judge-repeats must be at least 1 (got {options.judge_repeats})")


def _load_inputs(
    options: EvalOptions, *, kb_loader: Callable[[], KbContext] | None, spec: EvalSpec | None
) -> tuple[list[TestCase], dict[str, Any], Rubric, str, str, KbContext | None]:
    check_options(options)
    try:
        cases, meta = load_dataset(options.dataset)
    except DatasetError as exc:
        raise EvaluationError(exc.location) from exc
    if not cases:
        raise EvaluationError(f"{options.dataset}: the dataset holds no test cases")
    try:
        rubric = load_rubric(options.rubric)
    except RubricError as exc:
        raise EvaluationError(str(exc)) from exc
    try:
        prompt_bytes = options.system_prompt.read_bytes()
        prompt = prompt_bytes.decode("utf-8-sig")
    except OSError as exc:
        raise EvaluationError(f"{options.system_prompt}: cannot read system prompt ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise EvaluationError(f"{options.system_prompt}: system prompt is not UTF-8 text") from exc
    if not prompt.strip():
        raise EvaluationError(f"{options.system_prompt}: the system prompt is empty")
    kb: KbContext | None = None
    if options.kb is not None and rubric.spec.output != "support_draft":
        raise EvaluationError(f"--kb is only used by rubrics with output: support_draft, not by {rubric.name!r}")
    if rubric.spec.output == "support_draft":
        try:
            validate_support_cases(cases)
        except SupportFieldError as exc:
            raise EvaluationError(f"{options.dataset}: {exc}") from exc
        if spec is None:
            raise EvaluationError("the support-draft rubric needs the eval spec (intents, check thresholds)")
        try:
            kb = kb_loader() if kb_loader else KbContext()
        except KbLoadError as exc:
            raise EvaluationError(str(exc)) from exc
    return cases, meta, rubric, prompt, _sha(prompt_bytes), kb


def _pending_sample(index: int) -> dict[str, Any]:
    return {
        "sample_index": index,
        "status": "pending",
        "generator_output": None,
        "judge_scores": None,
        "flags": None,
        "judge_rationale": None,
        "checks": None,
        "error": None,
        "tokens": None,
        "cost_usd": None,
    }


def _case_result(case: TestCase, num_samples: int, rubric: Rubric) -> dict[str, Any]:
    per_metric, per_flag = st.case_stats([], rubric.metric_names, rubric.flag_names)
    return {
        "test_case_id": case.id,
        "test_case_input": case.input,
        "description": case.description,
        "task": case.task,
        "expected_constraints": case.expected_constraints,
        "reference": case.reference,
        "metadata": case.metadata,
        "status": "pending",
        "num_samples": num_samples,
        "samples": [_pending_sample(i) for i in range(num_samples)],
        "per_metric_stats": per_metric,
        "per_flag_stats": per_flag,
        "high_variance_metrics": [],
    }


def prepare(
    options: EvalOptions,
    *,
    kb_loader: Callable[[], KbContext] | None = None,
    spec: EvalSpec | None = None,
    run_id: str | None = None,
) -> Prepared:
    """Load and validate every input of a new run and build its empty document; raise EvaluationError."""
    all_cases, meta, rubric, prompt, prompt_hash, kb = _load_inputs(options, kb_loader=kb_loader, spec=spec)
    cases = select_cases(all_cases, options.case_ids, options.max_cases)
    run_id = run_id or str(uuid.uuid4())
    doc: dict[str, Any] = {
        "run_id": run_id,
        "description": options.description,
        "dataset_path": meta["path"],
        "dataset_hash": meta["hash"],
        "dataset_count": meta["count"],
        "dataset_format": meta["format"],
        "num_samples_per_case": options.num_samples,
        "status": "running",
        "timestamp_start": _utc(),
        "timestamp_end": None,
        "system_prompt_path": str(options.system_prompt.resolve()),
        "system_prompt_hash": prompt_hash,
        "case_selection": {
            "case_ids": options.case_ids,
            "max_cases": options.max_cases,
            "selected": [c.id for c in cases],
        },
        "generator_config": {
            "model": options.generator_model,
            "temperature": options.temperature,
            "seed": options.seed,
            "output": rubric.spec.output,
            "kb_source": kb.source if kb else None,
        },
        "judge_config": {
            "model": options.judge_model,
            "temperature": JUDGE_TEMPERATURE,
            "seed": options.seed,
            "repeats": options.judge_repeats,
        },
        "cache": cache_mode(options),
        "rubric_metadata": rubric.metadata(),
        "test_case_results": [_case_result(c, options.num_samples, rubric) for c in cases],
        "overall_metric_stats": st.overall_metric_stats([], rubric.metric_names),
        "overall_flag_stats": st.overall_flag_stats([], rubric.flag_names),
        "high_variance_count": 0,
        "judge_self_agreement": None,
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": None},
    }
    return Prepared(
        options=options,
        cases=cases,
        dataset_meta=meta,
        rubric=rubric,
        system_prompt=prompt,
        system_prompt_hash=prompt_hash,
        kb=kb,
        spec=spec,
        run_id=run_id,
        run_dir=options.output_dir / run_id,
        document=doc,
    )


def prepare_resume(
    run_id: str,
    *,
    output_dir: Path,
    overrides: EvalOptions | None = None,
    kb_loader_for: Callable[[Path | None], Callable[[], KbContext]] | None = None,
    spec: EvalSpec | None = None,
) -> Prepared:
    """Reload an interrupted run with its own settings; refuse if its dataset, rubric or prompt changed."""
    run_dir = output_dir / run_id
    main = run_dir / MAIN_ARTIFACT
    if not main.is_file():
        raise EvaluationError(f"--resume: no run {run_id!r} under {output_dir} (no {main.name})")
    old = read_json(main)
    if old.get("status") == "completed":
        raise EvaluationError(f"--resume: run {run_id} already completed; nothing to resume")
    sel = old["case_selection"]
    gen, judge, rub = old["generator_config"], old["judge_config"], old["rubric_metadata"]
    base = overrides or EvalOptions(dataset=Path(old["dataset_path"]), system_prompt=Path(old["system_prompt_path"]))
    options = EvalOptions(
        dataset=Path(old["dataset_path"]),
        system_prompt=Path(old["system_prompt_path"]),
        num_samples=old["num_samples_per_case"],
        case_ids=sel["case_ids"],
        max_cases=sel["max_cases"],
        rubric=rub["name"] if rub.get("builtin") else rub["path"],
        temperature=gen["temperature"],
        seed=gen["seed"],
        output_dir=output_dir,
        generator_model=gen["model"],
        judge_model=judge["model"],
        base_url=base.base_url,
        api_key=base.api_key,
        concurrency=base.concurrency,
        use_cache=base.use_cache,
        reuse_cache=base.reuse_cache,
        cache_dir=base.cache_dir,
        judge_repeats=int(judge.get("repeats", 1)),
        kb=Path(gen["kb_source"]) if gen.get("kb_source") not in (None, "database") else None,
        description=old.get("description", ""),
    )
    kb_loader = kb_loader_for(options.kb) if kb_loader_for else None
    fresh = prepare(options, kb_loader=kb_loader, spec=spec, run_id=run_id)
    for key, label in (("dataset_hash", "dataset"), ("system_prompt_hash", "system prompt")):
        if fresh.document[key] != old[key]:
            raise EvaluationError(
                f"--resume: the {label} changed since run {run_id} started ({old[key][:19]}… -> "
                f"{fresh.document[key][:19]}…); start a new run instead"
            )
    if fresh.rubric.hash != rub["hash"]:
        raise EvaluationError(
            f"--resume: the rubric changed since run {run_id} started ({rub['hash'][:19]}… -> "
            f"{fresh.rubric.hash[:19]}…); start a new run instead"
        )
    if fresh.document["case_selection"]["selected"] != sel["selected"]:
        raise EvaluationError(f"--resume: the selected test cases of run {run_id} are no longer the same")
    # Keep what identifies the original run; everything else is rebuilt from the journal.
    fresh.document["timestamp_start"] = old["timestamp_start"]
    for entry in Journal.read(run_dir / JOURNAL):
        sample = entry["sample"]
        if sample["status"] == "completed":
            fresh.done[(entry["case_id"], sample["sample_index"])] = sample
    return fresh


# --- one sample ---------------------------------------------------------------------------------


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
        return self.prepared.options


def generator_messages(p: Prepared, case: TestCase) -> list[dict[str, Any]]:
    """Return the generator's messages for a case (system prompt, then the case input or the ticket form)."""
    if p.rubric.spec.output == "support_draft":
        assert p.kb is not None and p.spec is not None
        user = generator_user_message(
            case, p.kb.for_case(case), list(p.spec.intents), p.spec.checks.confidence_fallback
        )
    else:
        user = case.input
    return [{"role": "system", "content": p.system_prompt}, {"role": "user", "content": user}]


def judge_messages(p: Prepared, case: TestCase, output_text: str) -> list[dict[str, Any]]:
    """Return the judge's messages: the rubric as instructions, then the case and the output to score."""
    parts = [f"TASK: {case.task}" if case.task else None, f"INPUT:\n{case.input}"]
    if case.expected_constraints:
        parts.append(f"EXPECTED CONSTRAINTS:\n{case.expected_constraints}")
    if case.reference:
        parts.append(f"REFERENCE OUTPUT:\n{case.reference}")
    if p.rubric.spec.output == "support_draft" and p.kb is not None:
        arts = p.kb.for_case(case)
        kb_text = "\n\n".join(f"[{a.article_id} revision {a.revision}] {a.title}\n{a.body}" for a in arts) or "(none)"
        parts.append(f"KB ARTICLES GIVEN TO THE WRITER:\n{kb_text}")
    parts.append(f"OUTPUT:\n{output_text}")
    return [
        {"role": "system", "content": judge_instructions(p.rubric)},
        {"role": "user", "content": "\n\n".join(x for x in parts if x)},
    ]


def _generator_seed(seed: int | None, index: int) -> int | None:
    # Each sample gets its own seed so that with --seed the samples stay reproducible yet different.
    return None if seed is None else seed + index


def _judge_seed(seed: int | None, repeat: int) -> int | None:
    # The first judgement keeps the run's seed; each repeat gets its own, so repeats are separate draws.
    return None if seed is None else seed + repeat


def _tokens(ans: Answer | None) -> dict[str, int] | None:
    return None if ans is None else {"prompt": ans.prompt_tokens, "completion": ans.completion_tokens}


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


_VALIDATORS: dict[str, Any] = {}


def _judge_validator(rubric: Rubric) -> Any:
    # Checking the schema itself is costly; do it once per rubric file, not once per answer.
    validator = _VALIDATORS.get(rubric.hash)
    if validator is None:
        schema = judge_schema(rubric)
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = _VALIDATORS[rubric.hash] = cls(schema)
    return validator


def parse_judge(content: str, rubric: Rubric) -> dict[str, Any]:
    """Parse and validate the judge's answer against the rubric's schema; raise ValueError saying why not."""
    try:
        data = loads_json(content)  # a model's answer is untrusted input: depth-limited
    except json.JSONDecodeError as exc:
        raise ValueError(f"the judge's answer is not JSON ({exc.msg} at position {exc.pos})") from exc
    validator = _judge_validator(rubric)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(str(x) for x in error.absolute_path) or "(top level)"
        raise ValueError(f"the judge's answer does not fit the rubric schema at {where}: {error.message}")
    return data


async def run_sample(rt: Runtime, case: TestCase, index: int) -> dict[str, Any]:
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


async def _judge_once(rt: Runtime, case: TestCase, index: int, output_text: str, repeat: int) -> tuple[Answer | None, dict[str, Any]]:
    """Ask the judge once; return its answer and the verdict record {status, judge_scores, flags, rationale, error}."""
    p, o = rt.prepared, rt.options
    verdict: dict[str, Any] = {"status": "completed", "judge_scores": None, "flags": None, "judge_rationale": None, "error": None}
    judge: Answer | None = None
    try:
        judge = await rt.client.complete(
            model=o.judge_model,
            messages=judge_messages(p, case, output_text),
            temperature=JUDGE_TEMPERATURE,
            seed=_judge_seed(o.seed, repeat),
            sample_index=index,
            response_format=judge_response_format(p.rubric),
            priority=0,  # finish started samples before starting new ones
            repeat=repeat,
        )
    except LlmConfigError:
        raise
    except LlmCallError as exc:
        verdict.update(status="judge_error", error=f"judge: {exc}")
        return None, verdict
    finally:
        rt.on_call()
    try:
        data = parse_judge(judge.content, p.rubric)
    except ValueError as exc:
        verdict.update(status="judge_invalid_response", error=str(exc), judge_raw=judge.content)
        return judge, verdict
    verdict.update(
        judge_scores={m: data[m] for m in p.rubric.metric_names},
        flags={f: bool(data[f]) for f in p.rubric.judge_flag_names},
        judge_rationale=data.get("rationale"),
    )
    return judge, verdict


def _sum_tokens(answers: list[Answer | None]) -> dict[str, int] | None:
    got = [a for a in answers if a is not None]
    if not got:
        return None
    return {"prompt": sum(a.prompt_tokens for a in got), "completion": sum(a.completion_tokens for a in got)}


async def _run_sample(rt: Runtime, case: TestCase, index: int, start: Callable[[], None]) -> dict[str, Any]:
    p, o = rt.prepared, rt.options
    sample = _pending_sample(index)
    support = p.rubric.spec.output == "support_draft"
    gen: Answer | None = None
    try:
        gen = await rt.client.complete(
            model=o.generator_model,
            messages=generator_messages(p, case),
            temperature=o.temperature,
            seed=_generator_seed(o.seed, index),
            sample_index=index,
            response_format=DRAFT_RESPONSE_FORMAT if support else None,
            on_start=start,
        )
    except LlmConfigError:
        raise  # every call would fail the same way: stop the run
    except LlmCallError as exc:
        for _ in range(1 + o.judge_repeats):  # the judge calls will not happen either
            rt.on_call()
        sample.update(status="generation_error", error=f"generator: {exc}")
        return sample
    rt.on_call()
    output: Any = gen.content
    output_text = gen.content
    if support:
        try:
            output = parse_draft(gen.content)
        except ValueError as exc:
            for _ in range(o.judge_repeats):
                rt.on_call()
            sample.update(status="generation_error", generator_output=gen.content, error=str(exc), tokens={"generator": _tokens(gen)})
            sample["cost_usd"] = _sample_cost(rt, gen, [])
            return sample
        output_text = draft_text_for_judge(output)
    sample["generator_output"] = output
    judged = await asyncio.gather(*(_judge_once(rt, case, index, output_text, r) for r in range(o.judge_repeats)))
    answers = [a for a, _ in judged]
    verdicts = [v for _, v in judged]
    first, first_verdict = answers[0], verdicts[0]
    sample["tokens"] = {"generator": _tokens(gen), "judge": _sum_tokens(answers)}
    sample["cost_usd"] = _sample_cost(rt, gen, answers)
    if o.judge_repeats > 1:
        # Every judgement, the first included; the sample's scores are the first one's (see docs/evaluator.md).
        sample["judge_repeats"] = [{k: v for k, v in verdict.items() if k != "judge_raw"} for verdict in verdicts]
    if first is None:
        sample.update(status="judge_error", error=first_verdict["error"])
        return sample
    if first_verdict["status"] != "completed":
        sample.update(status=first_verdict["status"], error=first_verdict["error"], judge_raw=first_verdict.get("judge_raw"))
        return sample
    flags = dict(first_verdict["flags"])
    if p.rubric.spec.automated_checks:
        assert p.kb is not None and p.spec is not None
        results = run_draft_checks(draft=output, case=case, kb=p.kb.snapshot, spec=p.spec)
        sample["checks"] = [{"key": r.key, "status": r.status, "reason": r.reason} for r in results]
        by_key = {r.key: r for r in results}
        for name in p.rubric.check_flags:
            r = by_key.get(name.removeprefix("check_"))
            flags[name] = bool(r is not None and r.failed)
    sample.update(
        status="completed",
        judge_scores=first_verdict["judge_scores"],
        flags=flags,
        judge_rationale=first_verdict["judge_rationale"],
    )
    return sample


# --- aggregation ----------------------------------------------------------------------------------


def finish_case(result: dict[str, Any], rubric: Rubric) -> None:
    """Fill a case's statistics and status from its samples (completed only count, as the guide says)."""
    samples = result["samples"]
    per_metric, per_flag = st.case_stats(samples, rubric.metric_names, rubric.flag_names)
    result["per_metric_stats"] = per_metric
    result["per_flag_stats"] = per_flag
    result["high_variance_metrics"] = [m for m, s in per_metric.items() if s["high_variance"]]
    statuses = [s["status"] for s in samples]
    if "pending" in statuses:
        result["status"] = "pending"
    elif all(s == "completed" for s in statuses):
        result["status"] = "completed"
    elif any(s == "completed" for s in statuses):
        result["status"] = "partial"
    else:
        result["status"] = "failed"


def finish_document(doc: dict[str, Any], rubric: Rubric, *, aborted: bool = False) -> None:
    """Fill the overall statistics and the run status (aborted, or from the cases' statuses)."""
    results = doc["test_case_results"]
    finished = [r for r in results if r["status"] != "pending"]
    doc["overall_metric_stats"] = st.overall_metric_stats([r["per_metric_stats"] for r in finished], rubric.metric_names)
    doc["overall_flag_stats"] = st.overall_flag_stats([r["per_flag_stats"] for r in finished], rubric.flag_names)
    doc["high_variance_count"] = sum(len(r["high_variance_metrics"]) for r in finished)
    repeats = int(doc.get("judge_config", {}).get("repeats", 1))
    if repeats > 1:
        samples = [s for r in finished for s in r["samples"]]
        doc["judge_self_agreement"] = {
            "repeats": repeats,
            **st.judge_self_agreement(samples, rubric.metric_names, rubric.judge_flag_names),
        }
    pt = ct = 0
    costs: list[float | None] = []
    for r in results:
        for s in r["samples"]:
            for part in (s.get("tokens") or {}).values():
                if part:
                    pt += part["prompt"]
                    ct += part["completion"]
            if s["status"] != "pending" and s.get("tokens"):
                costs.append(s.get("cost_usd"))
    known = all(c is not None for c in costs)
    doc["usage"] = {
        "prompt_tokens": pt,
        "completion_tokens": ct,
        "cost_usd": round(sum(c for c in costs if c is not None), 6) if known else None,
    }
    statuses = [r["status"] for r in results]
    if aborted or "pending" in statuses:
        doc["status"] = "aborted" if aborted else "running"
        return
    if all(s == "completed" for s in statuses):
        doc["status"] = "completed"
    elif all(s == "failed" for s in statuses):
        doc["status"] = "failed"
    else:
        doc["status"] = "partial"


def index_entry(doc: dict[str, Any], *, stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return this run's runs/index.json entry: ids, description, hashes, status and overall metrics."""
    entry = {
        "run_id": doc["run_id"],
        "description": doc.get("description", ""),
        "status": doc["status"],
        "timestamp_start": doc["timestamp_start"],
        "timestamp_end": doc["timestamp_end"],
        "dataset_path": doc["dataset_path"],
        "dataset_hash": doc["dataset_hash"],
        "rubric": doc["rubric_metadata"]["name"],
        "rubric_hash": doc["rubric_metadata"]["hash"],
        "generator_model": doc["generator_config"]["model"],
        "judge_model": doc["judge_config"]["model"],
        "num_cases": len(doc["test_case_results"]),
        "num_samples_per_case": doc["num_samples_per_case"],
        "overall_metrics": {m: {"mean_of_means": v["mean_of_means"]} for m, v in doc["overall_metric_stats"].items()},
        "overall_flags": {f: {"true_proportion": v["true_proportion"]} for f, v in doc["overall_flag_stats"].items()},
    }
    if stats:
        entry["execution"] = stats
    return entry


# --- the run ----------------------------------------------------------------------------------------


def planned_calls(p: Prepared, client: ChatClient) -> tuple[int, int]:
    """Return (calls the run needs, of which answered by the cache) for the samples still to do."""
    total = cached = 0
    support = p.rubric.spec.output == "support_draft"
    o = p.options
    for case in p.cases:
        gen_msgs = generator_messages(p, case)
        for i in range(o.num_samples):
            if (case.id, i) in p.done:
                continue
            total += 1 + o.judge_repeats
            req = {
                "model": o.generator_model,
                "messages": gen_msgs,
                "temperature": o.temperature,
                "seed": _generator_seed(o.seed, i),
                "sample_index": i,
                "response_format": DRAFT_RESPONSE_FORMAT if support else None,
            }
            ans = client.cached_answer(**req)
            if ans is None:
                continue
            cached += 1
            text = ans.content
            if support:
                try:
                    text = draft_text_for_judge(parse_draft(ans.content))
                except ValueError:
                    cached += o.judge_repeats  # no judge call will be made for a malformed draft
                    continue
            judge_msgs = judge_messages(p, case, text)
            for r in range(o.judge_repeats):
                if client.is_cached(
                    model=o.judge_model,
                    messages=judge_msgs,
                    temperature=JUDGE_TEMPERATURE,
                    seed=_judge_seed(o.seed, r),
                    sample_index=i,
                    response_format=judge_response_format(p.rubric),
                    repeat=r,
                ):
                    cached += 1
    return total, cached


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion, on uvloop when it is installed (uvicorn[standard] brings it).

    uvloop trims the per-request overhead of the event loop, which shows at high concurrency.
    Ctrl-C cancels the coroutine and raises KeyboardInterrupt, as with asyncio.run.
    """
    try:
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # e.g. on Windows: the standard loop works the same, a little slower
        factory = None
    with asyncio.Runner(loop_factory=factory) as loop_runner:
        return loop_runner.run(main)


def make_client(options: EvalOptions, prices: dict[str, Price], **kwargs: Any) -> ChatClient:
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
        **kwargs,
    )


async def execute(
    p: Prepared,
    client: ChatClient,
    *,
    on_call: Callable[[], None] = lambda: None,
    on_case: Callable[[dict[str, Any]], None] = lambda result: None,
    on_start: Callable[[Runtime], None] = lambda rt: None,
) -> dict[str, Any]:
    """Run every remaining sample, stream the case files and keep the artifacts current; return the document.

    `on_call` follows every call, `on_case` every case finished in this invocation, and
    `on_start` gets the runtime (samples in flight) before the first call. If the task is
    cancelled (Ctrl-C), the document is written with status "aborted" and the cancellation is re-raised.
    """
    doc = p.document
    run_dir = p.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    rt = Runtime(prepared=p, client=client, on_call=on_call)
    on_start(rt)
    results = {r["test_case_id"]: r for r in doc["test_case_results"]}
    remaining: dict[str, int] = {}
    for case in p.cases:
        result = results[case.id]
        for i in range(p.options.num_samples):
            done = p.done.get((case.id, i))
            if done is not None:
                result["samples"][i] = done
        remaining[case.id] = sum(1 for s in result["samples"] if s["status"] == "pending")
        if remaining[case.id] == 0:
            finish_case(result, p.rubric)
            write_json_atomic(run_dir / case_file_name(case.id), result)
    finish_document(doc, p.rubric)
    doc["status"] = "running"
    write_json_atomic(run_dir / MAIN_ARTIFACT, doc)
    journal = Journal(run_dir / JOURNAL)
    last_write = time.monotonic()

    async def write_off_loop(path: Path, text: str) -> None:
        # Encoding happens here on the loop; the write and its fsync run in a thread so they never
        # stall calls in flight. Each case file is written once, so no two writes race.
        await asyncio.to_thread(write_text_atomic, path, text)

    async def one(case: TestCase, index: int) -> None:
        nonlocal last_write
        sample = await run_sample(rt, case, index)
        result = results[case.id]
        result["samples"][index] = sample
        journal.append({"case_id": case.id, "sample": sample})
        remaining[case.id] -= 1
        if remaining[case.id] == 0:
            finish_case(result, p.rubric)
            on_case(result)
            await write_off_loop(run_dir / case_file_name(case.id), encode_json(result))
            # The main artifact is rewritten at most once a second while running: it grows with
            # the run, and the case files already hold each finished case. It is written here on
            # the loop (compact, no fsync: the final write is durable) so that no snapshot can
            # land after the final or the aborted one.
            if time.monotonic() - last_write >= ARTIFACT_WRITE_INTERVAL_S:
                last_write = time.monotonic()
                finish_document(doc, p.rubric)
                doc["cache"] = client.cache_report()
                write_json_atomic(run_dir / MAIN_ARTIFACT, doc, pretty=False, durable=False)

    tasks = [
        asyncio.ensure_future(one(case, i))
        for case in p.cases
        for i in range(p.options.num_samples)
        if results[case.id]["samples"][i]["status"] == "pending"
    ]
    try:
        if tasks:
            await asyncio.gather(*tasks)
    except BaseException:  # Ctrl-C (cancellation), a refused key, or a bug: leave valid, resumable artifacts
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        finish_document(doc, p.rubric, aborted=True)
        doc["cache"] = client.cache_report()
        write_json_atomic(run_dir / MAIN_ARTIFACT, doc)
        journal.close()
        raise
    journal.close()
    finish_document(doc, p.rubric)
    doc["cache"] = client.cache_report()
    doc["timestamp_end"] = _utc()
    write_json_atomic(run_dir / MAIN_ARTIFACT, doc)
    return doc
