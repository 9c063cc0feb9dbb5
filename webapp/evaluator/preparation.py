"""Before the first call: the run's options, its inputs loaded and validated, its empty document, or a run to resume.

Everything the run needs is prepared (and validated) here, so a bad dataset, rubric, prompt or
KB file stops the command with exit 2 and nothing written. `prepare_resume` reloads an
interrupted run's own settings from its artifact and its finished samples from the journal.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from webapp.core.spec import EvalSpec
from webapp.datasets.loader import DatasetError, DatasetMeta, SupportFieldError, TestCase, load_dataset
from webapp.evaluator import stats as st
from webapp.evaluator.artifact_models import (
    CaseSelection,
    DatasetEvaluation,
    GeneratorConfig,
    JudgeConfig,
    RubricMetadata,
    Sample,
    TestCaseResult,
)
from webapp.evaluator.artifacts import JOURNAL, MAIN_ARTIFACT, Journal, JournalError, read_json
from webapp.evaluator.rubric import Rubric, RubricError, load_rubric
from webapp.evaluator.support import KbContext, KbLoadError, validate_support_cases

JUDGE_TEMPERATURE = 0.0
TEMPERATURE_RANGE = (0.0, 2.0)  # what the Chat Completions API accepts


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


SampleKey = tuple[str, int]  # (test case id, sample index)


@dataclass
class Prepared:
    """Everything loaded and validated: the run can start."""

    options: EvalOptions
    cases: list[TestCase]
    rubric: Rubric
    system_prompt: str
    kb: KbContext | None
    spec: EvalSpec | None
    run_id: str
    run_dir: Path
    document: DatasetEvaluation
    done: dict[SampleKey, Sample] = field(default_factory=dict)  # completed samples restored from the journal

    @property
    def support(self) -> bool:
        """Tell whether the generator writes structured support drafts (KB-grounded)."""
        return self.rubric.spec.output == "support_draft"


@dataclass(frozen=True)
class _Inputs:
    cases: list[TestCase]
    meta: DatasetMeta
    rubric: Rubric
    prompt: str
    prompt_hash: str
    kb: KbContext | None


def reuses_cache(options: EvalOptions) -> bool:
    """Tell whether cached answers are reused: only when asked for (--cache) or reproducible by request (--seed)."""
    return options.use_cache and (options.reuse_cache or options.seed is not None)


def cache_mode(options: EvalOptions) -> str:
    """Return the artifact's `cache` value before the run: "off", "fresh", or "reused 0 of 0" (counted as it runs)."""
    if not options.use_cache:
        return "off"
    return "reused 0 of 0" if reuses_cache(options) else "fresh"


def utc_timestamp() -> str:
    """Return the current UTC time in ISO 8601, as the artifact's timestamps are written."""
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


def _load_inputs(options: EvalOptions, *, kb_loader: Callable[[], KbContext] | None, spec: EvalSpec | None) -> _Inputs:
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
    return _Inputs(cases, meta, rubric, prompt, _sha(prompt_bytes), kb)


def empty_case_result(case: TestCase, num_samples: int, rubric: Rubric) -> TestCaseResult:
    """Return a case's result before any sample: every sample pending, statistics over nothing."""
    per_metric, per_flag = st.case_stats([], rubric.metric_names, rubric.flag_names)
    return TestCaseResult(
        test_case_id=case.id,
        test_case_input=case.input,
        description=case.description,
        task=case.task,
        expected_constraints=case.expected_constraints,
        reference=case.reference,
        metadata=case.metadata,
        num_samples=num_samples,
        samples=[Sample(sample_index=i) for i in range(num_samples)],
        per_metric_stats=per_metric,
        per_flag_stats=per_flag,
    )


def prepare(
    options: EvalOptions,
    *,
    kb_loader: Callable[[], KbContext] | None = None,
    spec: EvalSpec | None = None,
    run_id: str | None = None,
) -> Prepared:
    """Load and validate every input of a new run and build its empty document; raise EvaluationError."""
    inputs = _load_inputs(options, kb_loader=kb_loader, spec=spec)
    rubric, kb = inputs.rubric, inputs.kb
    cases = select_cases(inputs.cases, options.case_ids, options.max_cases)
    run_id = run_id or str(uuid.uuid4())
    meta = inputs.meta
    doc = DatasetEvaluation(
        run_id=run_id,
        description=options.description,
        dataset_path=meta["path"],
        dataset_hash=meta["hash"],
        dataset_count=meta["count"],
        dataset_format=meta["format"],
        num_samples_per_case=options.num_samples,
        status="running",
        timestamp_start=utc_timestamp(),
        timestamp_end=None,
        system_prompt_path=str(options.system_prompt.resolve()),
        system_prompt_hash=inputs.prompt_hash,
        case_selection=CaseSelection(
            case_ids=options.case_ids, max_cases=options.max_cases, selected=[c.id for c in cases]
        ),
        generator_config=GeneratorConfig(
            model=options.generator_model,
            temperature=options.temperature,
            seed=options.seed,
            output=rubric.spec.output,
            kb_source=kb.source if kb else None,
        ),
        judge_config=JudgeConfig(
            model=options.judge_model, temperature=JUDGE_TEMPERATURE, seed=options.seed, repeats=options.judge_repeats
        ),
        cache=cache_mode(options),
        rubric_metadata=RubricMetadata.of(rubric),
        test_case_results=[empty_case_result(c, options.num_samples, rubric) for c in cases],
        overall_metric_stats=st.overall_metric_stats([], rubric.metric_names),
        overall_flag_stats=st.overall_flag_stats([], rubric.flag_names),
    )
    return Prepared(
        options=options,
        cases=cases,
        rubric=rubric,
        system_prompt=inputs.prompt,
        kb=kb,
        spec=spec,
        run_id=run_id,
        run_dir=options.output_dir / run_id,
        document=doc,
    )


def read_document(path: Path) -> DatasetEvaluation:
    """Read and validate a `dataset_evaluation.json`; raise EvaluationError naming the file and field."""
    try:
        return DatasetEvaluation.model_validate(read_json(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise EvaluationError(f"{path}: field '{loc}': {first['msg']}") from exc
    except ValueError as exc:  # not JSON
        raise EvaluationError(f"{path}: not a JSON artifact ({exc})") from exc


def _changed(label: str, run_id: str, old: str, new: str) -> EvaluationError:
    return EvaluationError(
        f"--resume: the {label} changed since run {run_id} started ({old[:19]}… -> {new[:19]}…); start a new run instead"
    )


def _resumed_options(old: DatasetEvaluation, output_dir: Path, overrides: EvalOptions | None) -> EvalOptions:
    """Return the options of an interrupted run: its own settings, with this invocation's endpoint and cache options."""
    sel, gen, judge, rub = old.case_selection, old.generator_config, old.judge_config, old.rubric_metadata
    base = overrides or EvalOptions(dataset=Path(old.dataset_path), system_prompt=Path(old.system_prompt_path))
    return EvalOptions(
        dataset=Path(old.dataset_path),
        system_prompt=Path(old.system_prompt_path),
        num_samples=old.num_samples_per_case,
        case_ids=sel.case_ids,
        max_cases=sel.max_cases,
        rubric=rub.name if rub.builtin else rub.path,
        temperature=gen.temperature,
        seed=gen.seed,
        output_dir=output_dir,
        generator_model=gen.model,
        judge_model=judge.model,
        base_url=base.base_url,
        api_key=base.api_key,
        concurrency=base.concurrency,
        use_cache=base.use_cache,
        reuse_cache=base.reuse_cache,
        cache_dir=base.cache_dir,
        judge_repeats=judge.repeats,
        kb=Path(gen.kb_source) if gen.kb_source not in (None, "database") else None,
        description=old.description,
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
    old = read_document(main)
    if old.status == "completed":
        raise EvaluationError(f"--resume: run {run_id} already completed; nothing to resume")
    sel, rub = old.case_selection, old.rubric_metadata
    options = _resumed_options(old, output_dir, overrides)
    kb_loader = kb_loader_for(options.kb) if kb_loader_for else None
    fresh = prepare(options, kb_loader=kb_loader, spec=spec, run_id=run_id)
    doc = fresh.document
    if doc.dataset_hash != old.dataset_hash:
        raise _changed("dataset", run_id, old.dataset_hash, doc.dataset_hash)
    if doc.system_prompt_hash != old.system_prompt_hash:
        raise _changed("system prompt", run_id, old.system_prompt_hash, doc.system_prompt_hash)
    if fresh.rubric.hash != rub.hash:
        raise _changed("rubric", run_id, rub.hash, fresh.rubric.hash)
    if doc.case_selection.selected != sel.selected:
        raise EvaluationError(f"--resume: the selected test cases of run {run_id} are no longer the same")
    # Keep what identifies the original run; everything else is rebuilt from the journal.
    doc.timestamp_start = old.timestamp_start
    try:
        entries = Journal.read(run_dir / JOURNAL)
    except JournalError as exc:
        raise EvaluationError(f"--resume: {exc}") from exc
    for entry in entries:
        if entry.sample.status == "completed":
            fresh.done[(entry.case_id, entry.sample.sample_index)] = entry.sample
    return fresh
