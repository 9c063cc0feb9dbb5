"""Read JSONL and YAML files as records that remember their line, for every import.

The dataset loader, the KB import and the drafts import all read "one object per record"
files and must name FILE:LINE on the first bad record; this module is the one place that
knows how to find those lines.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from webapp.core.safe_input import InputLimitError, compose_yaml, construct_yaml, loads_json, yaml_error_line

if TYPE_CHECKING:  # pydantic is not loaded by the readers: `draftdesk import dataset` refuses bad files before it
    from pydantic import JsonValue

SUPPORTED_FORMATS: tuple[str, ...] = (".jsonl", ".yaml", ".yml")


class RecordError(ValueError):
    """A bad file or record; `str()` is the message, `location` adds FILE:LINE when known.

    `field` names the record's field at fault where the reader knows it (the API's 422 `loc`).
    """

    def __init__(
        self, message: str, *, path: Path | str | None = None, line: int | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field

    @property
    def location(self) -> str:
        """Return `FILE:LINE: message` (or as much of it as is known)."""
        if self.path and self.line:
            return f"{self.path}:{self.line}: {self.message}"
        if self.path:
            return f"{self.path}: {self.message}"
        return self.message


@dataclass(frozen=True)
class Record:
    """One object read from a file: its 0-based index among records, its 1-based line, its data."""

    index: int
    line: int
    data: Any  # the parsed JSON value, as each import reads it (checked field by field there)


def _jsonable(value: object) -> JsonValue:
    """Turn YAML-only scalars (dates, timestamps) into strings so every value fits a JSON column."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return cast("JsonValue", value)  # the safe loader's other scalars: str, int, float, bool, None


def read_jsonl(data: bytes, *, path: Path | str) -> list[Record]:
    """Parse JSONL bytes: one JSON value per line, blank lines skipped."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RecordError(f"File is not valid UTF-8 ({exc.reason} at byte {exc.start})", path=path) from exc
    records: list[Record] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            value = loads_json(raw)
        except json.JSONDecodeError as exc:
            raise RecordError(f"Invalid JSON at line {lineno}: {exc.msg} (column {exc.colno})", path=path, line=lineno) from exc
        except InputLimitError as exc:
            raise RecordError(f"Refused: {exc.message}", path=path, line=lineno) from exc
        records.append(Record(index=len(records), line=lineno, data=value))
    return records


def read_yaml(data: bytes, *, path: Path | str) -> list[Record]:
    """Parse a YAML list; each item remembers the line it starts on."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RecordError(f"File is not valid UTF-8 ({exc.reason} at byte {exc.start})", path=path) from exc
    try:
        # The nodes carry the marks (lines); the values are built from them once the limits
        # (depth, alias expansion) have been checked, so an alias bomb is never expanded.
        node = compose_yaml(text)
        value = construct_yaml(node)
    except InputLimitError as exc:
        raise RecordError(f"Refused: {exc.message}", path=path, line=exc.line) from exc
    except yaml.YAMLError as exc:
        line = yaml_error_line(exc)
        problem = getattr(exc, "problem", None) or str(exc)
        where = f" at line {line}" if line else ""
        raise RecordError(f"Invalid YAML{where}: {problem}", path=path, line=line) from exc
    if value is None:
        return []
    if not isinstance(value, list) or not isinstance(node, yaml.SequenceNode):
        line = node.start_mark.line + 1 if node is not None else 1
        raise RecordError("YAML dataset must be a list of records (one '- ' item per record)", path=path, line=line)
    return [
        Record(index=i, line=item_node.start_mark.line + 1, data=_jsonable(item))
        for i, (item_node, item) in enumerate(zip(node.value, value, strict=True))
    ]


def file_format(path: Path | str, *, kind: str = "dataset", formats: tuple[str, ...] = SUPPORTED_FORMATS) -> str:
    """Return the file's extension, lower-cased; refuse formats other than `formats` (JSONL and YAML)."""
    suffix = Path(path).suffix.lower()
    if suffix not in formats:
        raise RecordError(
            f"Unsupported {kind} file format: {Path(path).suffix or '(none)'}. Supported formats: {', '.join(formats)}",
            path=path,
        )
    return suffix


def read_records(data: bytes, *, path: Path | str, fmt: str | None = None) -> list[Record]:
    """Parse bytes as JSONL or YAML according to the file's extension (or `fmt`)."""
    fmt = fmt or file_format(path)
    return read_jsonl(data, path=path) if fmt == ".jsonl" else read_yaml(data, path=path)


def read_file(path: Path) -> bytes:
    """Read a file's bytes, with a clear error when it is missing or unreadable."""
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise RecordError(f"File not found: {path}", path=path) from exc
    except IsADirectoryError as exc:
        raise RecordError(f"Not a file but a directory: {path}", path=path) from exc
    except OSError as exc:
        raise RecordError(f"Cannot read {path}: {exc.strerror}", path=path) from exc
