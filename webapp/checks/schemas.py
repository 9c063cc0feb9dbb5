"""JSON API shapes of the automated checks."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from webapp.checks.types import CheckStatus, RegressionAlertKind
from webapp.core.public import PublicModel
from webapp.web.api_schemas import Timestamp


class RatePublic(PublicModel):
    """Drafts passing every applicable check, out of the drafts checked (pass_rate null when none)."""

    passed: int
    failed: int
    total: int
    pass_rate: float | None


class ExamplesPublic(BaseModel):
    """The run's examples against its eval set, as the pilot gate counts them (the CI verdict's pass rate)."""

    passed: int = Field(description="Examples whose every draft is checked and passes")
    failed: int = Field(description="Examples with a checked draft that does not pass")
    unchecked: int = Field(description="Examples with a draft not checked yet (and none failing)")
    missing: int = Field(description="Examples of the eval set the run has no draft of (they count as failing)")
    total: int = Field(description="Examples of the eval set")
    pass_rate: float | None = Field(description="passed / total")


class CheckRatePublic(PublicModel):
    """One check across a run: passes, failures, not-applicables, pass rate over applicable drafts."""

    key: str
    label: str
    passed: int
    failed: int
    not_applicable: int
    pass_rate: float | None


class CheckFailure(PublicModel):
    """A check a draft failed, and why."""

    key: str
    reason: str


class FailingDraft(PublicModel):
    """A draft that failed at least one check."""

    draft_id: int
    case_id: str
    sample_index: int
    category: str | None
    intent: str | None
    golden: bool
    safety: bool
    passed: bool
    failures: list[CheckFailure]


class RunRef(BaseModel):
    """The run a summary is about."""

    id: int
    name: str
    dataset_id: int


class CiGate(BaseModel):
    """The CI gate's verdict on the run's checks (the pilot gate's automated pass rate)."""

    passes: bool
    reasons: list[str]
    pass_rate_required: float


class NewAlert(PublicModel):
    """A regression alert raised by this check of the run."""

    id: int
    kind: RegressionAlertKind
    message: str


class VerdictLinks(BaseModel):
    """Where people review the run (absolute URLs, from DRAFTDESK_BASE_URL): for a CI job's summary."""

    run: str = Field(description="The run's page")
    compare: str = Field(description="The comparison with its dataset's baseline (the PM and ML lead's review)")
    gate: str = Field(description="The run's pilot gate report")


class VerdictPublic(BaseModel):
    """The CI verdict on a run, exactly as `draftdesk check RUN` gives it (the same function)."""

    verdict: Literal["pass", "fail"] = Field(description="The run's verdict, whoever reads it")
    reasons: list[str] = Field(description="Why it fails (empty on pass); a blind grader's reasons count only what they may see")
    exit_code: Literal[0, 1] = Field(description="The exit code of `draftdesk check RUN`: 0 pass, 1 fail")
    text: str = Field(
        description="What `draftdesk check RUN` prints (80 columns, no colours); for a blind grader, a note instead"
    )
    links: VerdictLinks


class RunChecksPublic(VerdictPublic):
    """A run's check results: overall, per check, per category, per intent, the failing drafts, and the CI verdict."""

    run: RunRef
    drafts: int
    checked: int = Field(description="Drafts that have check results")
    checked_at: Timestamp | None
    kb_version: str | None
    kb_changed_since_check: bool
    overall: RatePublic
    examples: ExamplesPublic
    per_check: list[CheckRatePublic]
    per_category: dict[str, RatePublic]
    per_intent: dict[str, RatePublic]
    golden_failures: list[str] = Field(description="Case ids of golden examples that fail")
    safety_failures: list[str] = Field(description="Case ids of safety cases that fail")
    failing_drafts: list[FailingDraft] = Field(description="The failing drafts the caller may see (blind grading)")
    drafts_hidden: int = Field(
        description="Checked drafts left out of every figure because the caller has not graded them yet "
        "(blind grading); how many of them fail is not said"
    )
    gate: CiGate


class RecheckPublic(RunChecksPublic):
    """A run's check results after (re-)checking it, with the regression alerts it raised."""

    new_alerts: list[NewAlert]


class CheckResultPublic(PublicModel):
    """One check's result on a draft: pass, fail or not_applicable, with the reason."""

    key: str
    status: CheckStatus
    reason: str


class DraftChecksPublic(BaseModel):
    """One draft's stored check results (passed null and no results when the run was never checked, or while hidden)."""

    draft_id: int
    run: str
    case_id: str
    checked_at: Timestamp | None
    kb_version: str | None
    signals_hidden: bool = Field(
        description="True while blind grading hides the results from the caller (passed null, no results) until they grade the draft"
    )
    passed: bool | None
    results: list[CheckResultPublic]
