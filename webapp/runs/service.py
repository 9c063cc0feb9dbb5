"""Runs and their drafts: lookups shared by every domain."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypedDict, TypeGuard

from sqlalchemy import case, func
from sqlmodel import Session, col, select

from webapp.core.db import id_from_ref, stored_id
from webapp.datasets.models import Dataset, EvalCase
from webapp.datasets.records import Record, RecordError, file_format, read_jsonl
from webapp.datasets.service import DatasetNotFound, get_dataset
from webapp.runs.models import Draft, Run


class RunNotFound(LookupError):
    """No run has that name or id."""


def resolve_run(*, session: Session, ref: str | int) -> Run:
    """Return the run named `ref`, or with id `ref` when no run has that name; raise RunNotFound."""
    ref_s = str(ref).strip()
    run = session.exec(select(Run).where(Run.name == ref_s)).first()
    if run is None and (run_id := id_from_ref(ref_s)) is not None:
        run = session.get(Run, run_id)
    if run is None:
        raise RunNotFound(f"run: no run named or numbered {ref_s!r}")
    return run


# --- imports ----------------------------------------------------------------------------------------

DRAFT_FIELDS = (
    "case_id",
    "sample_index",
    "draft_text",
    "citations",
    "confidence",
    "intent",
    "escalated",
    "latency_ms",
    "cost_usd",
    "raw_output",
)


class DraftValues(TypedDict):
    """A draft's fields as an import file gives them, checked (the columns of Draft it sets)."""

    draft_text: str | None
    citations: list[dict[str, object]]
    confidence: float | None
    intent: str | None
    escalated: bool
    latency_ms: int | None
    cost_usd: float | None
    raw_output: object  # JSON: the assistant's output as logged


@dataclass(frozen=True)
class DraftRecord:
    """One record of a drafts file: where it is, which case and sample, and the draft's fields."""

    line: int
    case_id: str
    sample_index: int
    values: DraftValues


@dataclass
class DraftImportResult:
    """What a drafts import did."""

    run: Run
    run_created: bool
    created: int = 0
    updated: int = 0
    unchanged: int = 0

    @property
    def summary(self) -> str:
        what = "new run" if self.run_created else "existing run"
        return (
            f"{self.run.name} ({what}): {self.created} draft(s) created, {self.updated} updated, "
            f"{self.unchanged} unchanged"
        )


def _num(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


class BadField(Protocol):
    """Build the RecordError of a record's bad field: the import's message, and the field it is about."""

    def __call__(self, message: str, field: str) -> RecordError: ...


def _parse_citations(citations: object, bad: BadField) -> list[dict[str, object]]:
    """Check a record's citations: a list of {"article_id": text, "revision": whole number >= 1 or null}."""
    if not isinstance(citations, list):
        raise bad('citations: must be a list of {"article_id": ..., "revision": ...}', "citations")
    clean: list[dict[str, object]] = []
    for i, c in enumerate(citations):
        article = c.get("article_id") if isinstance(c, dict) else None
        if not isinstance(article, str) or not article.strip():
            raise bad(f'citations[{i}]: must be an object with "article_id" (a string) and "revision"', "citations")
        rev = c.get("revision")
        if rev is not None and (isinstance(rev, bool) or not isinstance(rev, int) or rev < 1):
            raise bad(f"citations[{i}].revision: must be a whole number of at least 1, not {rev!r}", "citations")
        clean.append({"article_id": article, "revision": rev})
    return clean


def _non_negative(d: dict[str, object], key: str, what: str, bad: BadField) -> float | None:
    """Return the record's `key` (a number of at least 0, or null), else raise naming the field."""
    value = d.get(key)
    if value is None:
        return None
    if not _num(value) or value < 0:
        raise bad(f"{key}: must be a number of {what} (0 or more) or null, not {value!r}", key)
    return value


def _draft_values(d: dict[str, object], bad: BadField) -> DraftValues:
    """Check the draft's own fields of a record (everything but case_id and sample_index)."""
    if "draft_text" not in d:
        raise bad("missing required field: draft_text (null when the assistant fell back or escalated)", "draft_text")
    text = d["draft_text"]
    if text is not None and not isinstance(text, str):
        raise bad("draft_text: must be a string or null", "draft_text")
    citations = _parse_citations(d.get("citations") or [], bad)
    conf = d.get("confidence")
    if conf is not None and not _num(conf):
        raise bad(f"confidence: must be a number or null, not {conf!r}", "confidence")
    intent = d.get("intent")
    if intent is not None and (not isinstance(intent, str) or len(intent) > 60):
        raise bad("intent: must be a string of at most 60 characters or null", "intent")
    escalated = d.get("escalated", False)
    if not isinstance(escalated, bool):
        raise bad(f"escalated: must be true or false, not {escalated!r}", "escalated")
    latency = _non_negative(d, "latency_ms", "milliseconds", bad)
    cost = _non_negative(d, "cost_usd", "dollars", bad)
    return DraftValues(
        draft_text=text,
        citations=citations,
        confidence=float(conf) if conf is not None else None,
        intent=intent,
        escalated=escalated,
        latency_ms=round(latency) if latency is not None else None,
        cost_usd=float(cost) if cost is not None else None,
        raw_output=d.get("raw_output", d),
    )


def parse_draft(record: Record, path: str) -> DraftRecord:
    """Check one record of drafts (a line of the file, an item of the API's batch); raise RecordError naming its field."""
    d = record.data

    def bad(message: str, field: str) -> RecordError:
        return RecordError(f"record {record.index + 1}: {message}", path=path, line=record.line, field=field)

    if not isinstance(d, dict):
        raise bad("must be a JSON object with case_id and the draft's fields", "(record)")
    case_id = d.get("case_id")
    if not isinstance(case_id, str) or not case_id.strip():
        raise bad("missing required field: case_id" if case_id is None else "case_id: must be a non-empty string", "case_id")
    sample = d.get("sample_index", 0)
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise bad(f"sample_index: must be a whole number of at least 0, not {sample!r}", "sample_index")
    return DraftRecord(record.line, case_id, sample, _draft_values(d, bad))


def parse_drafts(data: bytes, *, path: str) -> list[DraftRecord]:
    """Parse and validate a drafts JSONL file; raise RecordError at the first bad record."""
    if Path(path).suffix:
        file_format(path, kind="drafts", formats=(".jsonl",))
    records = read_jsonl(data, path=path)
    if not records:
        raise RecordError("the file holds no drafts", path=path)
    out: list[DraftRecord] = []
    seen: dict[tuple[str, int], int] = {}
    for record in records:
        dr = parse_draft(record, path)
        key = (dr.case_id, dr.sample_index)
        if key in seen:
            raise RecordError(
                f"record {record.index + 1}: case {dr.case_id!r} sample {dr.sample_index} appears twice "
                f"(first at line {seen[key]})",
                path=path,
                line=record.line,
            )
        seen[key] = record.line
        out.append(dr)
    return out


# How many grades each of these drafts has (drafts without grades may be left out). Grades belong to
# the grading domain, above runs: webapp.runs.hooks.import_drafts passes grading's count in.
GradeCounts = Callable[[Session, list[int]], dict[int, int]]


def refuse_regrading(
    session: Session,
    records: list[DraftRecord],
    cases: dict[str, int],
    existing: dict[tuple[int, int], Draft],
    *,
    run_name: str,
    path: str,
    grade_counts: GradeCounts,
) -> None:
    """Raise RecordError when the file changes the text or citations of drafts that already have grades.

    Those are what a grader judged (citation relevance is graded): a grade of other text would mislead.
    """
    changed = {
        stored_id(row.id): dr
        for dr in records
        if (row := existing.get((cases[dr.case_id], dr.sample_index))) is not None
        and (row.draft_text != dr.values["draft_text"] or row.citations != dr.values["citations"])
    }
    if not changed:
        return
    counts = grade_counts(session, list(changed))
    graded = sorted(
        ((dr, counts[draft_id]) for draft_id, dr in changed.items() if counts.get(draft_id)), key=lambda p: p[0].line
    )
    if not graded:
        return
    listed = ", ".join(
        f"{dr.case_id}{f' sample {dr.sample_index}' if dr.sample_index else ''} "
        f"(line {dr.line}, {n} grade{'' if n == 1 else 's'})"
        for dr, n in graded
    )
    raise RecordError(
        f"run {run_name!r}: {len(graded)} draft(s) that already have grades would get new text or citations, "
        f"and their grades would describe text nobody graded: {listed}. Nothing was imported: keep those drafts "
        "as they were graded, or import the new drafts into a new run (--run NEW-NAME)",
        path=path,
        line=graded[0][0].line,
    )


def import_drafts(
    *,
    session: Session,
    data: bytes,
    path: str,
    run_name: str,
    dataset: str | None = None,
    model: str | None = None,
    prompt_version: str | None = None,
    notes: str | None = None,
    source: str = "import",
    grade_counts: GradeCounts,
) -> DraftImportResult:
    """Import a drafts JSONL into the run `run_name` (created if new) in one transaction.

    `grade_counts` says which drafts have grades (webapp.runs.hooks.import_drafts passes grading's).

    Drafts are keyed by (case_id, sample_index): importing the same file twice changes nothing;
    a later file replaces the drafts it names, except the text or citations of a graded draft (refused). A new run needs its dataset: `dataset` (name or
    id; the newest version of a name), or the only dataset there is.
    """
    run_name = checked_run_name(run_name, path)
    records = parse_drafts(data, path=path)
    run = session.exec(select(Run).where(Run.name == run_name)).first()
    dataset_id = _dataset_of(session, run, dataset, run_name=run_name, path=path)
    cases = _case_pks(session, dataset_id, records, path=path)
    existing: dict[tuple[int, int], Draft] = {}
    if run is not None:
        existing = {
            (d.case_pk, d.sample_index): d for d in session.exec(select(Draft).where(Draft.run_id == run.id)).all()
        }
        refuse_regrading(session, records, cases, existing, run_name=run_name, path=path, grade_counts=grade_counts)
        if run.closed_at is not None and not all(stored_as(existing.get((cases[r.case_id], r.sample_index)), r) for r in records):
            raise RecordError(f"run {run_name!r} is completed: its drafts no longer change (import into a new run)", path=path)
    created_run = run is None
    if run is None:
        run = Run(
            name=run_name,
            dataset_id=dataset_id,
            model=model or "",
            prompt_version=prompt_version or "",
            notes=notes or "",
            source=source,
        )
        session.add(run)
        session.flush()
    else:
        _describe_run(session, run, model=model, prompt_version=prompt_version, notes=notes)
    result = DraftImportResult(run=run, run_created=created_run)
    store_drafts(session, stored_id(run.id), records, cases, existing, result)
    session.flush()
    return result


def checked_run_name(run_name: str, path: str) -> str:
    """Return the run's name stripped; refuse an empty or overlong one."""
    run_name = run_name.strip()
    if not run_name:
        raise RecordError("the run needs a name (--run)", path=path)
    if len(run_name) > 200:
        raise RecordError("the run name is longer than 200 characters", path=path)
    return run_name


def _dataset_of(session: Session, run: Run | None, dataset: str | None, *, run_name: str, path: str) -> int:
    """Return the id of the dataset the drafts answer: the run's (which `dataset` must agree with), else `dataset`, else the only one."""
    try:
        ds = get_dataset(session=session, ref=dataset) if dataset else None
    except DatasetNotFound as exc:
        raise RecordError(str(exc), path=path) from exc
    if run is not None:
        if ds is not None and ds.id != run.dataset_id:
            raise RecordError(
                f"run {run_name!r} is over dataset id {run.dataset_id}, not {ds.name} version {ds.version} (id {ds.id})",
                path=path,
            )
        return run.dataset_id
    if ds is None:
        all_ds = session.exec(select(Dataset)).all()
        if len(all_ds) != 1:
            raise RecordError(
                f"run {run_name!r} is new: say which dataset it ran over with --dataset NAME "
                f"({len(all_ds)} datasets are imported)",
                path=path,
            )
        ds = all_ds[0]
    return stored_id(ds.id)


def _case_pks(session: Session, dataset_id: int, records: list[DraftRecord], *, path: str) -> dict[str, int]:
    """Return the dataset's cases (case_id -> primary key); refuse a record whose case is not one of them."""
    cases = {
        c.case_id: stored_id(c.id) for c in session.exec(select(EvalCase).where(col(EvalCase.dataset_id) == dataset_id)).all()
    }
    for dr in records:
        if dr.case_id not in cases:
            raise RecordError(
                f"case_id {dr.case_id!r} is not a case of the run's dataset (id {dataset_id})",
                path=path,
                line=dr.line,
            )
    return cases


def _describe_run(
    session: Session, run: Run, *, model: str | None, prompt_version: str | None, notes: str | None
) -> None:
    """Update an existing run's model, prompt version and notes where the import names new ones."""
    changed = False
    for attr, value in (("model", model), ("prompt_version", prompt_version), ("notes", notes)):
        if value is not None and getattr(run, attr) != value:
            setattr(run, attr, value)
            changed = True
    if changed:
        session.add(run)


def stored_as(row: Draft | None, dr: DraftRecord) -> bool:
    """Tell whether a stored draft holds exactly the record's fields (then importing it changes nothing)."""
    return row is not None and all(getattr(row, k) == v for k, v in dr.values.items())


def store_drafts(
    session: Session,
    run_id: int,
    records: list[DraftRecord],
    cases: dict[str, int],
    existing: dict[tuple[int, int], Draft],
    result: DraftImportResult,
) -> None:
    """Add the new drafts, update the changed ones, and count what happened in `result`."""
    for dr in records:
        pk = cases[dr.case_id]
        row = existing.get((pk, dr.sample_index))
        if row is None:
            session.add(Draft(run_id=run_id, case_pk=pk, sample_index=dr.sample_index, **dr.values))
            result.created += 1
        elif stored_as(row, dr):
            result.unchanged += 1
        else:
            for k, v in dr.values.items():
                setattr(row, k, v)
            session.add(row)
            result.updated += 1


# --- queries ----------------------------------------------------------------------------------------


@dataclass
class RunRow:
    """One run as the runs list shows it: its dataset and draft counts (its check results are checks.RunSummary)."""

    run: Run
    dataset: Dataset | None
    drafts: int
    escalated: int
    fallbacks: int


def list_runs(*, session: Session, run_id: int | None = None) -> list[RunRow]:
    """List runs (or the one run `run_id`), newest first, with their dataset and draft counts."""
    stmt = select(Run).order_by(col(Run.created_at).desc(), col(Run.id).desc())
    counts_stmt = select(
        Draft.run_id,
        func.count(),
        func.sum(case((col(Draft.escalated).is_(True), 1), else_=0)),
        func.sum(case((col(Draft.draft_text).is_(None) & col(Draft.escalated).is_(False), 1), else_=0)),
    ).group_by(col(Draft.run_id))
    if run_id is not None:
        stmt = stmt.where(Run.id == run_id)
        counts_stmt = counts_stmt.where(Draft.run_id == run_id)
    runs = session.exec(stmt).all()
    counts = {
        rid: (n, esc or 0, fb or 0)
        for rid, n, esc, fb in session.exec(counts_stmt).all()
    }
    ds_ids = {r.dataset_id for r in runs}
    datasets = {d.id: d for d in session.exec(select(Dataset).where(col(Dataset.id).in_(ds_ids))).all()} if ds_ids else {}
    return [RunRow(r, datasets.get(r.dataset_id), *counts.get(stored_id(r.id), (0, 0, 0))) for r in runs]


@dataclass
class DraftRow:
    draft: Draft
    case: EvalCase


def list_drafts(
    *, session: Session, run_id: int, category: str = "", intent: str = "", draft_intent: str = "", golden: str = ""
) -> list[DraftRow]:
    """Return a run's drafts with their cases, in dataset order, filtered by the case's category/intent/golden.

    `intent` is the case's intent (the dataset's label), as everywhere in the product;
    `draft_intent` is the intent the assistant predicted for the draft.
    """
    stmt = (
        select(Draft, EvalCase)
        .join(EvalCase, col(EvalCase.id) == Draft.case_pk)
        .where(Draft.run_id == run_id)
    )
    if category:
        stmt = stmt.where(EvalCase.category == category)
    if intent:
        stmt = stmt.where(EvalCase.intent == intent)
    if draft_intent:
        stmt = stmt.where(Draft.intent == draft_intent)
    if golden in ("yes", "no"):
        stmt = stmt.where(EvalCase.golden == (golden == "yes"))
    rows = session.exec(stmt.order_by(col(EvalCase.position), col(Draft.sample_index))).all()
    return [DraftRow(d, c) for d, c in rows]


def draft_intents(*, session: Session, run_id: int) -> list[str]:
    """Return the intents the assistant predicted in a run's drafts, sorted (for the draft_intent filter)."""
    rows = session.exec(select(Draft.intent).where(Draft.run_id == run_id, col(Draft.intent).is_not(None)).distinct()).all()
    return sorted(str(i) for i in rows)


class DraftNotFound(LookupError):
    """No draft with that id."""


def get_draft(*, session: Session, draft_id: int) -> tuple[Draft, EvalCase, Run]:
    """Return a draft with its case and run; raise DraftNotFound."""
    draft = session.get(Draft, draft_id)
    if draft is None:
        raise DraftNotFound(f"draft: no draft with id {draft_id}")
    case_row = session.get(EvalCase, draft.case_pk)
    run = session.get(Run, draft.run_id)
    assert case_row is not None and run is not None
    return draft, case_row, run


def run_row(*, session: Session, run: Run) -> RunRow:
    """Return one run with its dataset and draft counts, as the runs list shows it."""
    return list_runs(session=session, run_id=run.id)[0]
