"""The run's files as Pydantic models: `dataset_evaluation.json`, `test_case_<id>.json`, journal lines, index entries.

The schema of the dataset format guide lives here and nowhere else: the run builds these models,
every assignment is validated (`validate_assignment`), and the files are their `model_dump` in
field order, so what is written is exactly the guide's shape (and the shape earlier versions
wrote, byte for byte). Numbers that come from a model's JSON answer (scores, confidence) keep
the type they arrived with (`int | float`) so a score of 4 is written as 4, not 4.0.
A few keys are written only when set (`OPTIONAL_KEYS`): they were absent from older artifacts
and carry no meaning when absent (a sample's `judge_repeats` without --judge-repeats, the
judge's raw answer only when it did not fit the rubric).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from webapp.evaluator.json_types import JsonObject
from webapp.evaluator.rubric import Flag, Metric, Rubric

SampleStatus = Literal["completed", "judge_error", "judge_invalid_response", "generation_error", "pending"]
CaseStatus = Literal["completed", "partial", "failed", "pending"]
RunStatus = Literal["completed", "partial", "failed", "running", "aborted"]
OutputKind = Literal["text", "support_draft"]
Number = int | float


class ArtifactModel(BaseModel):
    """Base of the artifact models: validated on construction and on every assignment, keys in field order."""

    model_config = ConfigDict(validate_assignment=True, extra="forbid")

    def to_json_dict(self) -> JsonObject:
        """Return the plain JSON value written to disk."""
        return self.model_dump(mode="json")


class WithOptionalKeys(ArtifactModel):
    """An artifact model some of whose keys are written only once set (listed in OPTIONAL_KEYS)."""

    OPTIONAL_KEYS: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_unset_optional_keys(self, handler: SerializerFunctionWrapHandler) -> JsonObject:
        data: JsonObject = handler(self)
        for key in self.OPTIONAL_KEYS - self.model_fields_set:
            data.pop(key, None)
        return data


# --- statistics -----------------------------------------------------------------------------------


class MetricStats(ArtifactModel):
    """One metric of one case over its completed samples (the guide's per_metric_stats entry)."""

    mean: float | None
    std: float | None
    min: Number | None
    max: Number | None
    count: int
    high_variance: bool


class FlagStats(ArtifactModel):
    """One flag of one case, or summed over cases (per_flag_stats and overall_flag_stats entries)."""

    true_count: int
    false_count: int
    total_count: int
    true_proportion: float | None


class OverallMetricStats(ArtifactModel):
    """One metric over the run: the mean of the per-case means."""

    mean_of_means: float | None
    min_of_means: float | None
    max_of_means: float | None
    num_cases: int


class FlagAgreement(ArtifactModel):
    """How often repeated judgements of the same sample agree on one flag."""

    samples: int
    exact_agreement: float | None
    pairwise_agreement: float | None


class MetricAgreement(FlagAgreement):
    """How often repeated judgements agree on one metric, with the pairs' distance."""

    within_one: float | None
    mean_abs_diff: float | None


class JudgeSelfAgreement(ArtifactModel):
    """The artifact's judge_self_agreement (only with --judge-repeats K > 1)."""

    repeats: int
    metrics: dict[str, MetricAgreement]
    flags: dict[str, FlagAgreement]


# --- samples --------------------------------------------------------------------------------------


class TokenCount(ArtifactModel):
    prompt: int
    completion: int


class SampleTokens(WithOptionalKeys):
    """Tokens of a sample's generation and of its judgements (summed over repeats)."""

    OPTIONAL_KEYS: ClassVar[frozenset[str]] = frozenset({"judge"})  # absent when the judge was never asked

    generator: TokenCount | None
    judge: TokenCount | None = None


class CheckOutcome(ArtifactModel):
    """One automated check on a support draft."""

    key: str
    status: str
    reason: str | None


class JudgeVerdict(ArtifactModel):
    """One judgement of a sample: its status, scores, flags and rationale, or why there are none."""

    status: SampleStatus = "completed"
    judge_scores: dict[str, Number] | None = None
    flags: dict[str, bool] | None = None
    judge_rationale: str | None = None
    error: str | None = None


class Sample(WithOptionalKeys):
    """One generated output and its judgement (a `samples` entry of a test case result)."""

    OPTIONAL_KEYS: ClassVar[frozenset[str]] = frozenset({"judge_repeats", "judge_raw"})

    sample_index: int
    status: SampleStatus = "pending"
    generator_output: str | JsonObject | None = None  # text, or the structured support draft
    judge_scores: dict[str, Number] | None = None
    flags: dict[str, bool] | None = None
    judge_rationale: str | None = None
    checks: list[CheckOutcome] | None = None
    error: str | None = None
    tokens: SampleTokens | None = None
    cost_usd: float | None = None
    judge_repeats: list[JudgeVerdict] | None = None
    judge_raw: str | None = None  # the judge's answer, when it did not fit the rubric


# --- test case results ----------------------------------------------------------------------------


class TestCaseResult(ArtifactModel):
    """One test case with its samples and statistics: an entry of test_case_results and `test_case_<id>.json`."""

    __test__: ClassVar[bool] = False  # not a pytest test class, despite the name

    test_case_id: str
    test_case_input: str
    description: str | None
    task: str | None
    expected_constraints: str | None
    reference: str | None
    metadata: JsonObject
    status: CaseStatus = "pending"
    num_samples: int
    samples: list[Sample]
    per_metric_stats: dict[str, MetricStats]
    per_flag_stats: dict[str, FlagStats]
    high_variance_metrics: list[str] = Field(default_factory=list)


# --- the run --------------------------------------------------------------------------------------


class CaseSelection(ArtifactModel):
    case_ids: list[str] | None
    max_cases: int | None
    selected: list[str]


class GeneratorConfig(ArtifactModel):
    model: str
    temperature: float
    seed: int | None
    # Defaults only matter when reading artifacts written before these keys existed.
    output: OutputKind = "text"
    kb_source: str | None = None  # the --kb file, "database", or None for rubrics without KB grounding


class JudgeConfig(ArtifactModel):
    model: str
    temperature: float
    seed: int | None
    repeats: int = 1


class RubricMetadata(ArtifactModel):
    """The rubric as the run used it, with the hash of its file."""

    name: str
    path: str
    hash: str
    builtin: bool = False  # read as a path when absent, as --resume always did
    description: str = ""
    output: OutputKind = "text"
    automated_checks: bool = False
    metrics: list[Metric]
    flags: list[Flag]
    check_flags: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, rubric: Rubric) -> RubricMetadata:
        """Return the artifact's rubric_metadata of a loaded rubric."""
        return cls(
            name=rubric.name,
            path=rubric.path,
            hash=rubric.hash,
            builtin=rubric.builtin,
            description=rubric.spec.description,
            output=rubric.spec.output,
            automated_checks=rubric.spec.automated_checks,
            metrics=list(rubric.spec.metrics),
            flags=list(rubric.spec.flags),
            check_flags=list(rubric.check_flags),
        )


class Usage(ArtifactModel):
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Number | None  # 0 (an int) when no sample has tokens yet, as json.dumps wrote it


class DatasetEvaluation(ArtifactModel):
    """`dataset_evaluation.json`: every field of the guide's schema, then ours."""

    run_id: str
    description: str = ""
    dataset_path: str
    dataset_hash: str
    dataset_count: int
    dataset_format: str
    num_samples_per_case: int
    status: RunStatus
    timestamp_start: str
    timestamp_end: str | None
    system_prompt_path: str
    system_prompt_hash: str
    case_selection: CaseSelection
    generator_config: GeneratorConfig
    judge_config: JudgeConfig
    cache: str = "off"
    rubric_metadata: RubricMetadata
    test_case_results: list[TestCaseResult]
    overall_metric_stats: dict[str, OverallMetricStats]
    overall_flag_stats: dict[str, FlagStats]
    high_variance_count: int = 0
    judge_self_agreement: JudgeSelfAgreement | None = None
    usage: Usage = Field(default_factory=lambda: Usage(prompt_tokens=0, completion_tokens=0, cost_usd=None))

    def __repr__(self) -> str:
        # Short on purpose: asyncio formats the repr of a finished task's result, and the full repr
        # of a 500-sample run costs about 0.1 s of CPU each time (a dict's repr was cut by reprlib).
        return f"DatasetEvaluation(run_id={self.run_id!r}, status={self.status!r}, cases={len(self.test_case_results)})"


# --- the journal and the index --------------------------------------------------------------------


class JournalEntry(ArtifactModel):
    """One line of `samples.jsonl`: a finished sample of a case."""

    case_id: str
    sample: Sample


class OverallMean(ArtifactModel):
    mean_of_means: float | None


class OverallProportion(ArtifactModel):
    true_proportion: float | None


class Execution(ArtifactModel):
    """What the invocation that last wrote an index entry did."""

    api_calls: int
    cache_hits: int
    retries: int
    rate_limited: int
    resumed: bool
    cache: str


class IndexEntry(WithOptionalKeys):
    """One run in `runs/index.json`."""

    OPTIONAL_KEYS: ClassVar[frozenset[str]] = frozenset({"execution"})

    run_id: str
    description: str
    status: RunStatus
    timestamp_start: str
    timestamp_end: str | None
    dataset_path: str
    dataset_hash: str
    rubric: str
    rubric_hash: str
    generator_model: str
    judge_model: str
    num_cases: int
    num_samples_per_case: int
    overall_metrics: dict[str, OverallMean]
    overall_flags: dict[str, OverallProportion]
    execution: Execution | None = None
