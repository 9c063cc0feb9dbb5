"""The support-draft form: KB grounding, the structured draft the generator answers with, and the checks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from sqlmodel import Session, select

from webapp.checks.rules import run_checks
from webapp.checks.types import CaseInput, CheckResult, Citation, DraftInput
from webapp.core.safe_input import loads_json
from webapp.core.spec import EvalSpec
from webapp.datasets.loader import SupportFieldError, TestCase, support_fields
from webapp.datasets.records import RecordError
from webapp.evaluator.json_types import JsonObject
from webapp.kb.models import KbArticle
from webapp.kb.records import parse_kb
from webapp.kb.service import current_revisions, kb_snapshot
from webapp.kb.snapshot import KbSnapshot

DRAFT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "intent": {"type": "string", "description": "The ticket's intent, one of the supported intents."},
        "draft": {
            "type": ["string", "null"],
            "description": "The reply to send, or null when escalating or when confidence is too low to draft.",
        },
        "citations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"article_id": {"type": "string"}, "revision": {"type": "integer"}},
                "required": ["article_id", "revision"],
                "additionalProperties": False,
            },
        },
        "confidence": {"type": ["number", "null"], "description": "Calibrated confidence from 0 to 1."},
        "escalate": {"type": "boolean", "description": "True to suppress the draft and escalate to a human."},
    },
    "required": ["intent", "draft", "citations", "confidence", "escalate"],
    "additionalProperties": False,
}
DRAFT_RESPONSE_FORMAT: JsonObject = {
    "type": "json_schema",
    "json_schema": {"name": "support_draft", "strict": True, "schema": DRAFT_SCHEMA},
}


_DRAFT_VALIDATOR = Draft202012Validator(DRAFT_SCHEMA)


class KbLoadError(ValueError):
    """A --kb file that cannot be read; the message names FILE:LINE."""


@dataclass(frozen=True)
class KbArticleText:
    article_id: str
    revision: int
    title: str
    body: str
    intent: str | None


@dataclass
class KbContext:
    """Current revisions to ground drafts with, and the full snapshot the checks need."""

    current: dict[str, KbArticleText] = field(default_factory=dict)
    snapshot: KbSnapshot = field(default_factory=KbSnapshot)
    source: str = ""

    def for_case(self, case: TestCase) -> list[KbArticleText]:
        """Return the current revisions of the case's kb_articles, else of articles sharing its intent."""
        wanted = case.metadata.get("kb_articles")
        if isinstance(wanted, list) and wanted:
            return [self.current[a] for a in wanted if isinstance(a, str) and a in self.current]
        intent = case.metadata.get("intent")
        if isinstance(intent, str):
            return [a for a in self.current.values() if a.intent == intent]
        return []


def kb_from_file(path: Path) -> KbContext:
    """Read KB revisions in the `draftdesk import kb` format; raise KbLoadError naming FILE:LINE."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KbLoadError(f"{path}: cannot read KB file ({exc.strerror})") from exc
    try:
        records = parse_kb(data, path=str(path))
    except RecordError as exc:
        raise KbLoadError(exc.location) from exc
    # A KB file names every revision (parse_kb requires it), and at most its newest is current.
    numbered = [(r, r.revision) for r in records if r.revision is not None]
    ctx = KbContext(snapshot=KbSnapshot.of((r.article_id, n, r.status) for r, n in numbered), source=str(path.resolve()))
    for r, n in numbered:
        if ctx.snapshot.current.get(r.article_id) == n:
            ctx.current[r.article_id] = KbArticleText(r.article_id, n, r.title or "", r.body or "", r.intent)
    return ctx


def kb_from_database(session: Session) -> KbContext:
    """Read the database's KB: current revisions for grounding, every revision for the checks."""
    ctx = KbContext(snapshot=kb_snapshot(session=session), source="database")
    intents = {a.article_id: a.intent for a in session.exec(select(KbArticle)).all()}
    for r in current_revisions(session=session):
        ctx.current[r.article_id] = KbArticleText(r.article_id, r.revision, r.title, r.body, intents.get(r.article_id))
    return ctx


def validate_support_cases(cases: list[TestCase]) -> None:
    """Check the support fields of every case; raise SupportFieldError naming the case and field."""
    for case in cases:
        try:
            support_fields(case.metadata)
        except SupportFieldError as exc:
            raise SupportFieldError(f"test case '{case.id}': {exc}") from exc


def generator_user_message(case: TestCase, articles: list[KbArticleText], intents: list[str], fallback: float) -> str:
    """Return the generator's user message: the ticket, account, history and KB articles, and the answer form."""
    parts = ["Customer ticket:", case.input.strip()]
    if case.metadata.get("account"):
        parts += ["", "Account metadata:", json.dumps(case.metadata["account"], ensure_ascii=False, sort_keys=True)]
    if case.metadata.get("conversation"):
        parts += ["", "Conversation history:", json.dumps(case.metadata["conversation"], ensure_ascii=False)]
    parts += ["", "Knowledge base articles (current revisions):"]
    if articles:
        for a in articles:
            parts += [f"[{a.article_id} revision {a.revision}] {a.title}", a.body.strip(), ""]
    else:
        parts.append("(none found for this ticket)")
    parts += [
        "",
        f"Supported intents: {', '.join(intents)}.",
        "Answer with a JSON object: intent; draft (the reply, or null when escalating or when your confidence "
        f"is below {fallback:g}); citations (article_id and revision of every article the draft relies on; "
        "with a null draft below that confidence, the articles the agent should read: a fallback surfaces them); "
        "confidence (0 to 1); escalate (true when the customer needs a human, for example distress, threats "
        "or legal demands).",
    ]
    return "\n".join(parts)


@dataclass(frozen=True)
class DraftCitation:
    article_id: str
    revision: int


@dataclass(frozen=True)
class SupportDraft:
    """The generator's structured draft, validated against DRAFT_SCHEMA; `raw` is the answer as written to artifacts."""

    intent: str
    draft: str | None
    citations: tuple[DraftCitation, ...]
    confidence: float | None
    escalate: bool
    raw: JsonObject

    def text_for_judge(self) -> str:
        """Return the structured draft as the judge reads it."""
        cites = ", ".join(f"{c.article_id} r{c.revision}" for c in self.citations) or "none"
        body = self.draft if self.draft is not None else "(no draft: suppressed)"
        return (
            f"Intent: {self.intent}\nEscalate: {str(self.escalate).lower()}\n"
            f"Confidence: {self.confidence}\nCitations: {cites}\nDraft:\n{body}"
        )


def parse_draft(content: str) -> SupportDraft:
    """Parse the generator's structured draft; raise ValueError saying what does not fit."""
    try:
        data = loads_json(content)  # a model's answer is untrusted input: depth-limited
    except json.JSONDecodeError as exc:
        raise ValueError(f"the generator's answer is not JSON ({exc.msg})") from exc
    error = best_match(_DRAFT_VALIDATOR.iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ValueError(f"the generator's answer does not fit the draft form at {where}: {error.message}")
    return SupportDraft(
        intent=data["intent"],
        draft=data["draft"],
        citations=tuple(DraftCitation(c["article_id"], c["revision"]) for c in data["citations"]),
        confidence=data["confidence"],
        escalate=data["escalate"],
        raw=data,
    )


def run_draft_checks(*, draft: SupportDraft, case: TestCase, kb: KbSnapshot, spec: EvalSpec) -> list[CheckResult]:
    """Run the automated checks on a structured draft (the checks engineer's rules)."""
    fields = support_fields(case.metadata)
    draft_in = DraftInput(
        draft_text=draft.draft,
        citations=tuple(Citation(c.article_id, c.revision) for c in draft.citations),
        confidence=draft.confidence,
        intent=draft.intent,
        escalated=draft.escalate,
    )
    case_in = CaseInput(
        case_id=case.id,
        input=case.input,
        category=fields.get("category"),
        expected_behavior=fields.get("expected_behavior"),
        golden=bool(fields.get("golden", False)),
        expected_confidence_above=fields.get("expected_confidence_above"),
        expected_confidence_min=fields.get("expected_confidence_min"),
        expected_confidence_max=fields.get("expected_confidence_max"),
        expected_citations=tuple(fields.get("expected_citations") or ()),
    )
    return run_checks(draft=draft_in, case=case_in, kb=kb, spec=spec)
