"""The team's pipeline over the API (issue 40): create a run, add its drafts in batches, complete it.

Every operation is idempotent so a CI job can retry it: the same run again answers the stored run,
the same drafts again count as `unchanged`. The drafts are checked by the import's own
`parse_drafts` rules (webapp.runs.service.parse_draft) with its messages; a batch is stored whole
or not at all.

Decisions (issue 40 is silent on them):
- `model_version` is the run's `model` column (the model that drafted, as the CLI's `--model`).
- A run is open until `complete`; completed (`closed_at` set), its drafts no longer change: a
  retried batch of identical drafts still answers `unchanged`, anything new or different is 409.
- The same name again with the same fields is the same run. A bare dataset name matches the run's
  dataset of that name whatever its version (a retry after a new dataset version is still the same
  run); `name@version` must be that version. A field left out counts as "" (notes too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from webapp.core.db import stored_id
from webapp.core.timeutil import utcnow
from webapp.datasets.models import Dataset, EvalCase
from webapp.datasets.records import Record, RecordError
from webapp.datasets.service import DatasetNotFound, get_dataset
from webapp.runs.models import Draft, Run
from webapp.runs.service import (
    DraftImportResult,
    DraftRecord,
    GradeCounts,
    checked_run_name,
    parse_draft,
    refuse_regrading,
    store_drafts,
    stored_as,
)

MAX_BATCH = 1000  # drafts per request
MAX_LISTED = 20  # bad records named in one 422 (the total is said too)
BODY = "request body"  # what the import's messages call the "file" of an API batch
API_SOURCE = "api"  # Run.source of a run the pipeline created

RunField = Literal["dataset", "model_version", "prompt_version", "retrieval_version", "commit", "notes"]


@dataclass(frozen=True)
class RunFields:
    """What the pipeline says about a run: its dataset (name, `name@version` or id) and its versions."""

    dataset: str
    model_version: str = ""
    prompt_version: str = ""
    retrieval_version: str = ""
    commit: str = ""
    notes: str = ""


@dataclass(frozen=True)
class RunCreated:
    """The run a create asked for, and whether this call created it."""

    run: Run
    created: bool


class RunConflict(Exception):
    """A run of that name exists with other fields (409)."""

    def __init__(self, run: Run, fields: list[RunField]) -> None:
        self.fields = fields
        super().__init__(
            f"run {run.name!r} exists with another {', '.join(fields)}: a run's fields do not change; "
            "name the new run differently"
        )


class BatchTooLarge(ValueError):
    """More drafts in one request than MAX_BATCH (413)."""


class DraftConflict(Exception):
    """Drafts that would change stored ones without `replace`, or any change to a completed run (409)."""


@dataclass(frozen=True)
class BadRecord:
    """One bad record of a batch: its 0-based index, the field at fault and the import's message."""

    index: int
    field: str
    message: str
    kind: str = "value_error"


class DraftBatchInvalid(ValueError):
    """A batch with bad records (422): the first MAX_LISTED of them, and how many there are."""

    def __init__(self, errors: list[BadRecord]) -> None:
        self.errors = errors[:MAX_LISTED]
        self.total = len(errors)
        super().__init__(f"{self.total} bad record(s); nothing was stored")


@dataclass
class DraftBatchResult:
    """What a batch did: drafts created, already stored as sent, and replaced."""

    created: int = 0
    unchanged: int = 0
    replaced: int = 0


# --- runs -------------------------------------------------------------------------------------------


def resolve_dataset(*, session: Session, ref: str) -> Dataset:
    """Return the dataset `ref` names: `name@version`, else a name (its newest version) or an id; raise RecordError."""
    ref = ref.strip()
    name, sep, version = ref.rpartition("@")
    if sep and version.isdigit():
        ds = session.exec(select(Dataset).where(Dataset.name == name, Dataset.version == int(version))).first()
        if ds is None:
            raise RecordError(f"dataset: no dataset {name!r} version {version}", path=BODY, field="dataset")
        return ds
    try:
        return get_dataset(session=session, ref=ref)
    except DatasetNotFound as exc:
        raise RecordError(str(exc), path=BODY, field="dataset") from None


def _differing(session: Session, run: Run, fields: RunFields, ref: Dataset) -> list[RunField]:
    """Return the fields in which a stored run differs from what the pipeline says of it."""
    stored = session.get(Dataset, run.dataset_id)
    by_name = "@" not in fields.dataset and not fields.dataset.strip().isdigit()
    same_dataset = stored is not None and (stored.name == ref.name if by_name else stored.id == ref.id)
    out: list[RunField] = [] if same_dataset else ["dataset"]
    pairs: tuple[tuple[RunField, str, str], ...] = (
        ("model_version", run.model, fields.model_version),
        ("prompt_version", run.prompt_version, fields.prompt_version),
        ("retrieval_version", run.retrieval_version, fields.retrieval_version),
        ("commit", run.commit, fields.commit),
        ("notes", run.notes, fields.notes),
    )
    return out + [name for name, have, want in pairs if have != want]


def _same_run(session: Session, run: Run, fields: RunFields, ds: Dataset) -> RunCreated:
    """Answer the stored run when the pipeline says the same of it; raise RunConflict otherwise."""
    if differing := _differing(session, run, fields, ds):
        raise RunConflict(run, differing)
    return RunCreated(run, False)


def _run_named(session: Session, name: str) -> Run | None:
    return session.exec(select(Run).where(Run.name == name)).first()


def create_run(*, session: Session, name: str, fields: RunFields) -> RunCreated:
    """Create the run `name` over its dataset; the same name with the same fields answers the stored run.

    Two identical requests at once create one run: the unique name refuses the second insert, which
    then reads the first one's run (inside a savepoint, so the request's transaction goes on).
    """
    name = checked_run_name(name, BODY)
    ds = resolve_dataset(session=session, ref=fields.dataset)
    if (existing := _run_named(session, name)) is not None:
        return _same_run(session, existing, fields, ds)
    run = Run(
        name=name,
        dataset_id=stored_id(ds.id),
        model=fields.model_version,
        prompt_version=fields.prompt_version,
        retrieval_version=fields.retrieval_version,
        commit=fields.commit,
        notes=fields.notes,
        source=API_SOURCE,
    )
    try:
        with session.begin_nested():
            session.add(run)
            session.flush()
    except IntegrityError:
        if (existing := _run_named(session, name)) is None:
            raise
        return _same_run(session, existing, fields, ds)
    return RunCreated(run, True)


def close_run(*, session: Session, run: Run) -> Run:
    """Complete the run: it takes no more drafts (completing it again keeps the first time)."""
    locked = _locked(session, run)
    if locked.closed_at is None:
        locked.closed_at = utcnow()
        session.add(locked)
        session.flush()
    return locked


def _locked(session: Session, run: Run) -> Run:
    """Return the run's row locked until the request commits (PostgreSQL; SQLite's writes are serialized already)."""
    stmt = select(Run).where(Run.id == run.id).with_for_update().execution_options(populate_existing=True)
    return session.exec(stmt).one()


# --- drafts -----------------------------------------------------------------------------------------


def _validated(records: list[object], cases: dict[str, int]) -> list[DraftRecord]:
    """Check every record by the import's rules; raise DraftBatchInvalid listing each bad one."""
    bad: list[BadRecord] = []
    out: list[DraftRecord] = []
    seen: dict[tuple[str, int], int] = {}
    for index, data in enumerate(records):
        prefix = f"record {index + 1}: "
        try:
            dr = parse_draft(Record(index=index, line=index + 1, data=data), BODY)
        except RecordError as exc:
            bad.append(BadRecord(index, exc.field or "(record)", exc.message.removeprefix(prefix)))
            continue
        key = (dr.case_id, dr.sample_index)
        if dr.case_id not in cases:
            bad.append(BadRecord(index, "case_id", f"case_id {dr.case_id!r} is not a case of the run's dataset"))
        elif key in seen:
            message = f"case {dr.case_id!r} sample {dr.sample_index} appears twice (first at record {seen[key] + 1})"
            bad.append(BadRecord(index, "sample_index", message))
        else:
            seen[key] = index
            out.append(dr)
    if bad:
        raise DraftBatchInvalid(bad)
    return out


def _case_pks(session: Session, dataset_id: int) -> dict[str, int]:
    rows = session.exec(select(EvalCase.case_id, EvalCase.id).where(col(EvalCase.dataset_id) == dataset_id)).all()
    return {case_id: stored_id(pk) for case_id, pk in rows}


def _refuse_changes(run: Run, records: list[DraftRecord], existing: dict[tuple[int, int], Draft], cases: dict[str, int], *, replace: bool) -> int:
    """Raise DraftConflict when the batch changes what it may not; return how many stored drafts it changes."""
    fresh = [dr for dr in records if (cases[dr.case_id], dr.sample_index) not in existing]
    changed = [
        (i, dr)
        for i, dr in enumerate(records)
        if (row := existing.get((cases[dr.case_id], dr.sample_index))) is not None and not stored_as(row, dr)
    ]
    if run.closed_at is not None and (fresh or changed):
        raise DraftConflict(
            f"run {run.name!r} was completed at {run.closed_at.isoformat()}: it takes no new or changed drafts "
            f"({len(fresh)} new, {len(changed)} changed in this batch); send them to a new run"
        )
    if changed and not replace:
        listed = ", ".join(f"record {i + 1} ({dr.case_id} sample {dr.sample_index})" for i, dr in changed[:MAX_LISTED])
        more = f" and {len(changed) - MAX_LISTED} more" if len(changed) > MAX_LISTED else ""
        raise DraftConflict(
            f"run {run.name!r}: {len(changed)} draft(s) are stored with other content: {listed}{more}. Nothing was "
            "stored: send the batch with replace=true to replace them (the run is still open)"
        )
    return len(changed)


def add_drafts(
    *, session: Session, run: Run, records: list[object], replace: bool = False, grade_counts: GradeCounts
) -> DraftBatchResult:
    """Store a batch of draft records in an open run, all or nothing; the same drafts again count as unchanged.

    `grade_counts` is grading's (webapp.runs.hooks.grade_counts): a graded draft keeps its text and
    citations even with `replace`. Two identical batches at once store once: the second's inserts
    hit the drafts' unique key, and it reads the batch again as unchanged.
    """
    if len(records) > MAX_BATCH:
        raise BatchTooLarge(f"at most {MAX_BATCH} drafts per request; this one has {len(records)}: send it in parts")
    if not records:
        raise DraftBatchInvalid([BadRecord(0, "(body)", "the batch holds no drafts", "missing")])
    run = _locked(session, run)
    cases = _case_pks(session, run.dataset_id)
    parsed = _validated(records, cases)
    for attempt in (1, 2):
        try:
            with session.begin_nested():
                return _store(session, run, parsed, cases, replace=replace, grade_counts=grade_counts)
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _store(
    session: Session, run: Run, parsed: list[DraftRecord], cases: dict[str, int], *, replace: bool, grade_counts: GradeCounts
) -> DraftBatchResult:
    """Store the checked batch (inside the caller's savepoint) and count what it did."""
    existing = {(d.case_pk, d.sample_index): d for d in session.exec(select(Draft).where(Draft.run_id == run.id)).all()}
    _refuse_changes(run, parsed, existing, cases, replace=replace)
    try:
        refuse_regrading(session, parsed, cases, existing, run_name=run.name, path=BODY, grade_counts=grade_counts)
    except RecordError as exc:
        raise DraftConflict(exc.message.replace("(--run NEW-NAME)", "(another run name)")) from None
    result = DraftImportResult(run=run, run_created=False)
    store_drafts(session, stored_id(run.id), parsed, cases, existing, result)
    session.flush()
    return DraftBatchResult(created=result.created, unchanged=result.unchanged, replaced=result.updated)


def run_state(run: Run) -> Literal["open", "closed"]:
    """Return whether the run still takes drafts."""
    return "open" if run.closed_at is None else "closed"
