"""The draft a sample of an evaluation becomes, as the database stores it and as the pipeline API takes it.

Kept free of the database (no SQLModel table is imported here) so that `--record --url` can map a
run's samples without opening the local database; webapp.evaluator.service builds its Draft rows
from the same fields.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, JsonValue

from webapp.evaluator.artifact_models import DatasetEvaluation, OutputKind, Sample


class CitationOut(BaseModel):
    article_id: str
    revision: int | None = None


class _GeneratedDraft(BaseModel):
    """A structured support draft as the artifact holds it (it fitted DRAFT_SCHEMA when generated)."""

    draft: str | None = None
    citations: list[CitationOut] = Field(default_factory=list)
    confidence: float | None = None
    intent: JsonValue = None
    escalate: JsonValue = None


class DraftFields(BaseModel):
    """A sample's draft: the fields of a Draft row besides its run and case."""

    sample_index: int
    cost_usd: float | None = None
    draft_text: str | None = None
    citations: list[CitationOut] = Field(default_factory=list)
    confidence: float | None = None
    intent: str | None = None
    escalated: bool = False
    raw_output: JsonValue = None


class DraftLine(DraftFields):
    """A draft as a line of `draftdesk import drafts` (and a record of `POST /api/v1/runs/{run}/drafts`)."""

    case_id: str


class RunFields(BaseModel):
    """The ordinary run (source "evaluator" in the database) the recorded drafts belong to."""

    name: str
    model: str
    prompt_version: str
    notes: str


def draft_fields(sample: Sample, output_kind: OutputKind) -> DraftFields | None:
    """Return the draft of a sample (None when nothing was generated: no draft to grade)."""
    out = sample.generator_output
    if out is None:
        return None
    index, cost = sample.sample_index, sample.cost_usd
    if output_kind != "support_draft":
        return DraftFields(sample_index=index, cost_usd=cost, draft_text=str(out), raw_output={"text": out})
    if not isinstance(out, dict):
        return None
    d = _GeneratedDraft.model_validate(out)
    return DraftFields(
        sample_index=index,
        cost_usd=cost,
        draft_text=d.draft,
        citations=d.citations,
        confidence=d.confidence,
        intent=str(d.intent)[:60] if d.intent else None,
        escalated=bool(d.escalate),
        raw_output=out,
    )


def draft_lines(document: DatasetEvaluation) -> list[DraftLine]:
    """Return every draft of a finished evaluation, in case and sample order, as the drafts import takes them."""
    kind = document.generator_config.output
    return [
        DraftLine(case_id=result.test_case_id, **fields.model_dump())
        for result in document.test_case_results
        for sample in result.samples
        if (fields := draft_fields(sample, kind)) is not None
    ]


def run_fields(document: DatasetEvaluation) -> RunFields:
    """Return the run's name, model, prompt version and notes (the same locally and over the API)."""
    gen, rubric = document.generator_config, document.rubric_metadata
    return RunFields(
        name=f"evaluator-{document.run_id}",
        model=gen.model[:200],
        prompt_version=f"{Path(document.system_prompt_path).name} {document.system_prompt_hash[:19]}"[:200],
        notes=(document.description or f"prompt-evaluator run with rubric {rubric.name}"),
    )
