"""Load an eval dataset (JSONL or YAML) with exactly the semantics of the dataset format guide.

`load_dataset(path) -> (test_cases, metadata)` is shared by the dataset import, the web upload
and prompt-evaluator. Errors are `DatasetError` (a ValueError) whose message is the guide's
wording and which carries the file and the line of the bad record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictStr, ValidationError, field_validator

from webapp.datasets.records import Record, RecordError, file_format, read_file, read_records

REQUIRED_FIELDS: tuple[str, ...] = ("id", "input")
OPTIONAL_FIELDS: tuple[str, ...] = ("description", "task", "expected_constraints", "reference")
KNOWN_FIELDS: frozenset[str] = frozenset(REQUIRED_FIELDS + OPTIONAL_FIELDS)

class DatasetMeta(TypedDict):
    """The guide's dataset metadata: absolute path, content hash, case count, format."""

    path: str
    hash: str
    count: int
    format: str


class Expectations(TypedDict, total=False):
    """A case's expectations of the response (the `case_expectations` check), as EvalCase columns."""

    expected_confidence_above: float
    expected_confidence_min: float
    expected_confidence_max: float
    expected_citations: list[str]


class SupportFields(Expectations, total=False):
    """The support-specific fields read from a case's metadata, as EvalCase column values."""

    category: str
    intent: str
    account: dict[str, JsonValue]
    conversation: list[JsonValue]
    kb_articles: list[str]
    golden: bool
    expected_behavior: str


CATEGORIES: tuple[str, ...] = ("routine", "edge", "adversarial", "safety")
EXPECTED_BEHAVIORS: tuple[str, ...] = ("draft", "escalate", "fallback")


class DatasetError(RecordError):
    """A dataset that cannot be loaded; `.path` and `.line` say where (line may be None)."""


class TestCase(BaseModel):
    """One test case: the guide's required and optional fields, and every other field in `metadata`."""

    __test__ = False  # not a pytest test class, despite the name
    model_config = ConfigDict(frozen=True)

    id: StrictStr
    input: StrictStr
    description: StrictStr | None = None
    task: StrictStr | None = None
    expected_constraints: StrictStr | None = None
    reference: StrictStr | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("id", "input")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a non-empty string")
        return value


@dataclass(frozen=True)
class LoadedCase:
    """A test case with the line it was read from (for FILE:LINE messages of later checks)."""

    line: int
    case: TestCase


def _to_case(record: Record, *, path: Path | str) -> TestCase:
    data = record.data
    if not isinstance(data, dict):
        raise DatasetError(
            f"Record at line {record.line} is not an object (found {type(data).__name__})", path=path, line=record.line
        )
    for name in REQUIRED_FIELDS:
        if name not in data:
            raise DatasetError(
                f"Record at line {record.line} is missing required field: {name}", path=path, line=record.line
            )
    fields = {k: v for k, v in data.items() if k in KNOWN_FIELDS and not (k in OPTIONAL_FIELDS and v is None)}
    metadata = {k: v for k, v in data.items() if k not in KNOWN_FIELDS}
    try:
        return TestCase.model_validate({**fields, "metadata": metadata})
    except ValidationError as exc:
        field = str(exc.errors()[0]["loc"][0]) if exc.errors() and exc.errors()[0]["loc"] else "record"
        raise DatasetError(
            f"Invalid test case at index {record.index}: {field} field validation failed", path=path, line=record.line
        ) from exc


def parse_dataset(data: bytes, *, path: Path | str, fmt: str | None = None) -> list[LoadedCase]:
    """Parse dataset bytes into test cases with their lines; raise DatasetError on the first bad record."""
    fmt = fmt or _format(path)
    try:
        records = read_records(data, path=path, fmt=fmt)
    except DatasetError:
        raise
    except RecordError as exc:
        raise DatasetError(exc.message, path=exc.path, line=exc.line) from exc
    seen: set[str] = set()
    out: list[LoadedCase] = []
    for record in records:
        case = _to_case(record, path=path)
        if case.id in seen:
            raise DatasetError(
                f"Duplicate test case ID '{case.id}' found at line {record.line}", path=path, line=record.line
            )
        seen.add(case.id)
        out.append(LoadedCase(line=record.line, case=case))
    return out


def _format(path: Path | str) -> str:
    try:
        return file_format(path)
    except RecordError as exc:
        raise DatasetError(exc.message, path=path) from exc


def sha256_of(data: bytes) -> str:
    """Return the content hash in the guide's form, `sha256:<hex>`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def dataset_metadata(data: bytes, *, path: Path, fmt: str, count: int) -> DatasetMeta:
    """Return the guide's metadata dict: absolute path, content hash, case count, format."""
    return {"path": str(path.resolve()), "hash": sha256_of(data), "count": count, "format": fmt}


def load_dataset(path: Path) -> tuple[list[TestCase], DatasetMeta]:
    """Load and validate a dataset file; return its test cases and its metadata (path, hash, count, format)."""
    path = Path(path)
    fmt = _format(path)  # the extension is checked before the file is opened, as in the guide
    try:
        data = read_file(path)
    except RecordError as exc:
        raise DatasetError(exc.message, path=path) from exc
    loaded = parse_dataset(data, path=path, fmt=fmt)
    cases = [lc.case for lc in loaded]
    return cases, dataset_metadata(data, path=path, fmt=fmt, count=len(cases))


# --- support-specific metadata --------------------------------------------------------------------


class SupportFieldError(ValueError):
    """A support-specific metadata field with the wrong type or value."""


def _str_list(value: JsonValue) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)


def _category(value: JsonValue) -> str:
    if value not in CATEGORIES:
        raise SupportFieldError(f"category: {value!r} is not one of {', '.join(CATEGORIES)}")
    return str(value)


def _intent(value: JsonValue) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SupportFieldError(f"intent: must be a non-empty string, not {value!r}")
    if len(value) > 60:
        raise SupportFieldError("intent: must be at most 60 characters")
    return value


def _account(value: JsonValue) -> dict[str, JsonValue]:
    if not isinstance(value, dict):
        raise SupportFieldError(f"account: must be an object of account metadata, not {type(value).__name__}")
    return value


def _conversation(value: JsonValue) -> list[JsonValue]:
    if not isinstance(value, list):
        raise SupportFieldError(f"conversation: must be a list of messages, not {type(value).__name__}")
    for i, msg in enumerate(value):
        if not isinstance(msg, str | dict):
            raise SupportFieldError(f"conversation[{i}]: must be a message object or a string")
    return value


def _kb_articles(value: JsonValue) -> list[str]:
    if not _str_list(value):
        raise SupportFieldError("kb_articles: must be a list of article ids such as [\"KB-1042\"]")
    return value


def _golden(value: JsonValue) -> bool:
    if not isinstance(value, bool):
        raise SupportFieldError(f"golden: must be true or false, not {value!r}")
    return value


def _expected_behavior(value: JsonValue) -> str:
    if value not in EXPECTED_BEHAVIORS:
        raise SupportFieldError(f"expected_behavior: {value!r} is not one of {', '.join(EXPECTED_BEHAVIORS)}")
    return str(value)


def support_fields(metadata: Mapping[str, JsonValue]) -> SupportFields:
    """Read category, intent, account, conversation, kb_articles, golden, expected_behavior and the expectations from metadata.

    Returns the EvalCase column values for the fields present (null counts as absent); raises
    SupportFieldError naming the field when one has the wrong type or value.
    """
    out: SupportFields = {}
    if (value := metadata.get("category")) is not None:
        out["category"] = _category(value)
    if (value := metadata.get("intent")) is not None:
        out["intent"] = _intent(value)
    if (value := metadata.get("account")) is not None:
        out["account"] = _account(value)
    if (value := metadata.get("conversation")) is not None:
        out["conversation"] = _conversation(value)
    if (value := metadata.get("kb_articles")) is not None:
        out["kb_articles"] = _kb_articles(value)
    if (value := metadata.get("golden")) is not None:
        out["golden"] = _golden(value)
    if (value := metadata.get("expected_behavior")) is not None:
        out["expected_behavior"] = _expected_behavior(value)
    return {**out, **expectation_fields(metadata)}


CONFIDENCE_BOUNDS: tuple[str, ...] = ("expected_confidence_above", "expected_confidence_min", "expected_confidence_max")


def expectation_fields(metadata: Mapping[str, JsonValue]) -> Expectations:
    """Read a case's expectations (confidence bounds, expected citations); raise SupportFieldError naming the field."""
    bounds: dict[str, float] = {}
    for name in CONFIDENCE_BOUNDS:
        value = metadata.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise SupportFieldError(f"{name}: must be a number from 0 to 1, not {value!r}")
        bounds[name] = float(value)
    above, low, high = (bounds.get(n) for n in CONFIDENCE_BOUNDS)
    if above is not None and low is not None:
        raise SupportFieldError(
            "expected_confidence_above and expected_confidence_min: give one lower bound, "
            "above (strict) or min (inclusive)"
        )
    lower = above if above is not None else low
    if lower is not None and high is not None and (high < lower or (above is not None and high == above)):
        raise SupportFieldError(f"expected_confidence_max: {high:g} leaves no confidence above the lower bound {lower:g}")
    out: Expectations = {}
    if above is not None:
        out["expected_confidence_above"] = above
    if low is not None:
        out["expected_confidence_min"] = low
    if high is not None:
        out["expected_confidence_max"] = high
    if metadata.get("expected_citations") is not None:
        value = metadata["expected_citations"]
        if not _str_list(value) or not value:
            raise SupportFieldError('expected_citations: must be a non-empty list of article ids such as ["KB-2011", "KB-2098"]')
        out["expected_citations"] = list(value)
    return out


EXPECTATION_FIELDS: tuple[str, ...] = (*CONFIDENCE_BOUNDS, "expected_citations")


def golden_expectation_warning(
    *, case_id: str, golden: bool, category: str | None, expected_behavior: str | None, has_expectations: bool,
    default_behaviors: Mapping[str, str],
) -> str | None:
    """Return the warning for a golden case that states no expectation fields, or None when it needs none.

    The check `case_expectations` enforces the plan's golden expectations ("confidence above 0.8",
    "both articles are cited") only when the case states them; without them it silently does not
    run. Decision: a golden case that expects an escalation or a fallback (its own field, else its
    category's default) needs none (expected behaviour judges it, and a fallback has nothing to
    cite); every other golden case without one of EXPECTATION_FIELDS gets this warning.
    """
    if not golden or has_expectations:
        return None
    behaviour = expected_behavior or (default_behaviors.get(category) if category else None)
    if behaviour in ("escalate", "fallback"):
        return None
    return (
        f"golden case '{case_id}' states no expectation fields ({', '.join(EXPECTATION_FIELDS)}): "
        "the case-expectations check does not run on it"
    )

