"""Datasets: import a file as a (new version of a) named dataset, list datasets, read cases."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from webapp.core.db import id_from_ref, stored_id
from webapp.core.spec import EvalSpec
from webapp.datasets.loader import (
    CONFIDENCE_BOUNDS,
    EXPECTATION_FIELDS,
    DatasetError,
    LoadedCase,
    SupportFieldError,
    SupportFields,
    golden_expectation_warning,
    parse_dataset,
    sha256_of,
    support_fields,
)
from webapp.datasets.mix import dataset_mix
from webapp.datasets.models import Dataset, EvalCase
from webapp.datasets.records import RecordError, file_format, read_file


class DatasetNotFound(LookupError):
    """No dataset with that name or id."""


@dataclass
class DatasetImportResult:
    """The dataset version an import produced or found, and whether anything was written."""

    dataset: Dataset
    created: bool
    message: str
    # How the file departs from the plan's stratified mix and top-10 intents (webapp.datasets.mix);
    # the import still succeeds, and every caller shows these.
    plan_warnings: list[str] = field(default_factory=list)
    # Golden cases that state no expectation fields, each with its line (the CLI prints FILE:LINE).
    case_warnings: list[CaseWarning] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """Every warning as one line of text (the admin upload page lists them)."""
        return self.plan_warnings + [w.text for w in self.case_warnings]


@dataclass(frozen=True)
class CaseWarning:
    """A warning about one case of an imported file: the line it was read from, its id and what is wrong."""

    line: int
    case_id: str
    message: str

    @property
    def text(self) -> str:
        return f"line {self.line}: {self.message}"


def latest_version(*, session: Session, name: str) -> Dataset | None:
    """Return the newest version of the dataset with this name, or None."""
    return session.exec(select(Dataset).where(Dataset.name == name).order_by(col(Dataset.version).desc())).first()


def import_dataset(
    *, session: Session, data: bytes, path: str, name: str | None = None, spec: EvalSpec | None = None
) -> DatasetImportResult:
    """Import dataset bytes read from `path` in one transaction.

    The same bytes as the newest version of that name change nothing (and say so); other bytes
    become the next version. A bad record raises DatasetError (FILE:LINE) before a row is written.
    With `spec` (every caller in the app passes it), the result's warnings say how the file departs
    from the plan's category mix and intents.
    """
    try:
        fmt = file_format(path)
    except RecordError as exc:
        raise DatasetError(exc.message, path=path) from exc
    loaded = parse_dataset(data, path=path, fmt=fmt)
    if not loaded:
        raise DatasetError("the dataset holds no test cases", path=path)
    typed = _typed_fields(loaded, path)
    warnings = (
        dataset_mix(((lc.case.id, f.get("category"), f.get("intent")) for lc, f in zip(loaded, typed, strict=True)), spec).warnings()
        if spec is not None
        else []
    )
    case_warnings = _golden_warnings(loaded, typed, spec)
    digest = sha256_of(data)
    name = (name or Path(path).stem).strip()
    if not name:
        raise DatasetError("the dataset needs a name (--name)", path=path)
    latest = latest_version(session=session, name=name)
    if latest is not None and latest.sha256 == digest:
        return DatasetImportResult(
            latest, False, f"{name} version {latest.version} already holds this file ({digest[:19]}…); nothing imported", warnings, case_warnings
        )
    version = (latest.version + 1) if latest else 1
    ds = Dataset(
        name=name,
        version=version,
        sha256=digest,
        format=fmt,
        count=len(loaded),
        source_path=str(path)[:1000],
    )
    session.add(ds)
    session.flush()
    session.add_all(_eval_cases(stored_id(ds.id), loaded, typed))
    session.flush()
    verb = "new version" if latest else "new dataset"
    return DatasetImportResult(
        ds, True, f"{name} version {version} imported ({verb}): {len(loaded)} test cases, {digest[:19]}…", warnings, case_warnings
    )


def _typed_fields(loaded: list[LoadedCase], path: str) -> list[SupportFields]:
    """Return each case's support fields; refuse (FILE:LINE) a bad field or an id longer than 200 characters."""
    typed: list[SupportFields] = []
    for lc in loaded:
        try:
            typed.append(support_fields(lc.case.metadata))
        except SupportFieldError as exc:
            raise DatasetError(f"test case '{lc.case.id}': {exc}", path=path, line=lc.line) from exc
    for lc in loaded:
        if len(lc.case.id) > 200:
            raise DatasetError(f"test case id is longer than 200 characters: '{lc.case.id[:40]}…'", path=path, line=lc.line)
    return typed


def _eval_cases(dataset_id: int, loaded: list[LoadedCase], typed: list[SupportFields]) -> list[EvalCase]:
    """Return the EvalCase rows of a new dataset version, in file order."""
    return [
        EvalCase(
            dataset_id=dataset_id,
            position=position,
            case_id=lc.case.id,
            input=lc.case.input,
            description=lc.case.description,
            task=lc.case.task,
            expected_constraints=lc.case.expected_constraints,
            reference=lc.case.reference,
            extra=dict(lc.case.metadata),
            **fields,
        )
        for position, (lc, fields) in enumerate(zip(loaded, typed, strict=True))
    ]


def _default_behaviors(spec: EvalSpec | None) -> dict[str, str]:
    """Return what a case of each category expects when it states no expected_behavior (the spec's checks)."""
    return {str(k): str(v) for k, v in spec.checks.expected_behavior_by_category.items()} if spec is not None else {}


def _golden_warnings(loaded: list[LoadedCase], typed: list[SupportFields], spec: EvalSpec | None) -> list[CaseWarning]:
    """Return a warning, with its line, for each golden case of a file that states no expectation fields."""
    out: list[CaseWarning] = []
    for lc, fields in zip(loaded, typed, strict=True):
        message = golden_expectation_warning(
            case_id=lc.case.id, golden=bool(fields.get("golden")), category=fields.get("category"),
            expected_behavior=fields.get("expected_behavior"),
            has_expectations=any(fields.get(k) is not None for k in EXPECTATION_FIELDS),
            default_behaviors=_default_behaviors(spec),
        )
        if message:
            out.append(CaseWarning(lc.line, lc.case.id, message))
    return out


def golden_without_expectations(*, session: Session, dataset_id: int, spec: EvalSpec) -> list[tuple[EvalCase, str]]:
    """Return the dataset's golden cases that state no expectation fields, each with its warning (the gate shows them)."""
    cases = session.exec(
        select(EvalCase).where(EvalCase.dataset_id == dataset_id, col(EvalCase.golden).is_(True)).order_by(col(EvalCase.position))
    ).all()
    out: list[tuple[EvalCase, str]] = []
    for c in cases:
        message = golden_expectation_warning(
            case_id=c.case_id, golden=c.golden, category=c.category, expected_behavior=c.expected_behavior,
            has_expectations=any(getattr(c, k) is not None for k in CONFIDENCE_BOUNDS) or bool(c.expected_citations),
            default_behaviors=_default_behaviors(spec),
        )
        if message:
            out.append((c, message))
    return out


def import_dataset_once(
    *, session: Session, data: bytes, path: str, name: str, spec: EvalSpec | None
) -> DatasetImportResult:
    """Import as import_dataset does, in a savepoint: of two identical imports at once, one stores the version.

    The other's insert hits the unique (name, version) and it reads the stored version again (nothing imported).
    """
    for attempt in (1, 2):
        try:
            with session.begin_nested():
                return import_dataset(session=session, data=data, path=path, name=name, spec=spec)
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def import_dataset_file(
    *, session: Session, path: Path, name: str | None = None, spec: EvalSpec | None = None
) -> DatasetImportResult:
    """Import a dataset file from disk (see import_dataset)."""
    try:
        file_format(path)
        data = read_file(path)
    except RecordError as exc:
        raise DatasetError(exc.message, path=path) from exc
    return import_dataset(session=session, data=data, path=str(path), name=name, spec=spec)


# --- queries ----------------------------------------------------------------------------------------


def list_datasets(*, session: Session) -> list[Dataset]:
    """List every dataset version, by name, newest version first."""
    return list(session.exec(select(Dataset).order_by(Dataset.name, col(Dataset.version).desc())).all())


def get_dataset(*, session: Session, ref: str | int) -> Dataset:
    """Return a dataset by id, or the newest version with that name; raise DatasetNotFound."""
    ref_s = str(ref).strip()
    ds = session.get(Dataset, dataset_id) if (dataset_id := id_from_ref(ref_s)) is not None else None
    if ds is None:
        ds = latest_version(session=session, name=ref_s)
    if ds is None:
        raise DatasetNotFound(f"dataset: no dataset named or numbered {ref_s!r}")
    return ds


@dataclass
class CaseFilter:
    category: str = ""
    intent: str = ""
    golden: str = ""  # "", "yes", "no"
    q: str = ""


def list_cases(*, session: Session, dataset_id: int, filters: CaseFilter | None = None) -> list[EvalCase]:
    """Return a dataset's cases in file order, filtered by category, intent, golden and text."""
    f = filters or CaseFilter()
    stmt = select(EvalCase).where(EvalCase.dataset_id == dataset_id)
    if f.category:
        stmt = stmt.where(EvalCase.category == f.category)
    if f.intent:
        stmt = stmt.where(EvalCase.intent == f.intent)
    if f.golden in ("yes", "no"):
        stmt = stmt.where(EvalCase.golden == (f.golden == "yes"))
    if f.q.strip():
        like = f"%{f.q.strip().lower()}%"
        stmt = stmt.where(func.lower(EvalCase.case_id).like(like) | func.lower(EvalCase.input).like(like))
    return list(session.exec(stmt.order_by(col(EvalCase.position))).all())


def get_case(*, session: Session, dataset_id: int, case_id: str) -> EvalCase:
    """Return one case of a dataset by its case id; raise DatasetNotFound."""
    case = session.exec(
        select(EvalCase).where(EvalCase.dataset_id == dataset_id, EvalCase.case_id == case_id)
    ).first()
    if case is None:
        raise DatasetNotFound(f"dataset {dataset_id} has no case {case_id!r}")
    return case


def case_facets(*, session: Session, dataset_id: int) -> dict[str, list[str]]:
    """Return the categories and intents present in a dataset, for filter menus."""
    rows = session.exec(select(EvalCase.category, EvalCase.intent).where(EvalCase.dataset_id == dataset_id)).all()
    return {
        "categories": sorted({c for c, _ in rows if c}),
        "intents": sorted({i for _, i in rows if i}),
    }


def category_counts(*, session: Session, dataset_id: int) -> dict[str, int]:
    """Count a dataset's cases per category (None for cases without one)."""
    rows = session.exec(
        select(EvalCase.category, func.count()).where(EvalCase.dataset_id == dataset_id).group_by(EvalCase.category)
    ).all()
    return {c or "none": n for c, n in rows}
