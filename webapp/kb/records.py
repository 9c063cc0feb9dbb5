"""KB revision records: one record's rules and messages, for the file import and the sync API alike.

A record is one revision of one article: `article_id`, `revision`, `title`, `body`, `status`,
`effective_date` and `intent` (docs/data-in.md). A KB file (`draftdesk import kb`, the admin
upload, prompt-evaluator's --kb) names every field but `intent`; the sync API (PUT
/api/v1/kb/articles/{id}, POST /api/v1/kb/sync) may leave out `revision` (the server numbers it:
the article's newest plus one), `status` (current), `effective_date` (today, UTC) and, when the
revision deprecates or deletes an article Draft Desk holds, `title` and `body` (the newest
revision's text is kept).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

from webapp.core.safe_input import InputLimitError, loads_json
from webapp.datasets.records import Record, RecordError, file_format, read_records
from webapp.kb.models import REVISION_STATUSES, RevisionStatus

ARTICLE_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*-[A-Za-z0-9][A-Za-z0-9._-]*$")
KB_FIELDS = ("article_id", "revision", "title", "body", "status", "effective_date", "intent")
FILE_REQUIRED = ("article_id", "revision", "title", "body", "status", "effective_date")
# A help-center export may also be one JSON document per file (an object, or a list of objects).
SYNC_FORMATS = (".jsonl", ".yaml", ".yml", ".json")


@dataclass(frozen=True)
class KbRecord:
    """One revision as a file or a request states it; None: left to the server (see the module's docstring)."""

    index: int  # 0-based among the request's (or file's) records
    line: int  # 1-based line in its file (0: a JSON request's record)
    article_id: str
    revision: int | None
    title: str | None
    body: str | None
    status: RevisionStatus
    effective_date: dt.date | None
    intent: str | None
    source: str = ""  # the file it came from ("" for a JSON request)


class FieldProblem(ValueError):
    """One bad field of one record: its field name and the import's message."""

    def __init__(self, field: str, message: str, kind: str = "value_error") -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.kind = kind


def _text(d: dict, name: str, limit: int | None = None) -> str | None:
    value = d.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise FieldProblem(name, f"{name}: must be a non-empty string")
    if limit is not None and len(value) > limit:
        raise FieldProblem(name, f"{name}: must be at most {limit} characters")
    return value


def parse_record(
    d: object, *, index: int, line: int = 0, required: tuple[str, ...] = FILE_REQUIRED,
    intents: tuple[str, ...] | None = None, source: str = "",
) -> KbRecord:
    """Check one record field by field; raise FieldProblem at the first bad field (the import's messages)."""
    if not isinstance(d, dict):
        raise FieldProblem("(record)", f"must be an object with {', '.join(FILE_REQUIRED)}", "type_error")
    for name in required:
        if name not in d or d[name] is None:
            raise FieldProblem(name, f"missing required field: {name}", "missing")
    unknown = sorted(set(d) - set(KB_FIELDS))
    if unknown:
        raise FieldProblem(unknown[0], f"unknown field(s): {', '.join(unknown)} (allowed: {', '.join(KB_FIELDS)})", "extra_forbidden")
    aid = d.get("article_id")
    if not isinstance(aid, str) or not ARTICLE_ID_RE.match(aid) or len(aid) > 40:
        raise FieldProblem("article_id", f"article_id: {aid!r} is not an article id such as 'KB-3001'")
    rev = d.get("revision")
    if rev is not None and (isinstance(rev, bool) or not isinstance(rev, int) or rev < 1 or rev > 2**31 - 1):
        raise FieldProblem("revision", f"revision: must be a whole number of at least 1, not {rev!r}")
    title, body = _text(d, "title", 300), _text(d, "body")
    status = d.get("status", "current")
    if status not in REVISION_STATUSES:
        raise FieldProblem("status", f"status: {status!r} is not one of {', '.join(REVISION_STATUSES)}")
    if status == "current" and (title is None or body is None):
        raise FieldProblem("title" if title is None else "body", "missing required field: " + ("title" if title is None else "body"), "missing")
    raw_date = d.get("effective_date")
    try:
        eff = raw_date if isinstance(raw_date, dt.date) or raw_date is None else dt.date.fromisoformat(str(raw_date))
    except ValueError:
        raise FieldProblem("effective_date", f"effective_date: {raw_date!r} is not a date (YYYY-MM-DD)") from None
    intent = _text(d, "intent")
    if intent is not None and intents is not None and intent not in intents:
        raise FieldProblem("intent", f"intent: {intent!r} is not one of the spec's intents ({', '.join(intents)})")
    return KbRecord(index, line, aid, rev, title, body, status, eff, intent, source)


def check_together(records: list[KbRecord]) -> list[tuple[KbRecord, FieldProblem]]:
    """Return the problems between records: a revision given twice, two current ones, a current one not the newest."""
    problems: list[tuple[KbRecord, FieldProblem]] = []
    seen: dict[tuple[str, int], KbRecord] = {}
    unnumbered: dict[str, KbRecord] = {}
    current: dict[str, KbRecord] = {}
    newest: dict[str, KbRecord] = {}
    for r in records:
        if r.revision is None:
            if r.article_id in unnumbered:
                problems.append((r, FieldProblem("article_id", f"{r.article_id} appears twice without a revision number (first {_where(unnumbered[r.article_id])})")))
            unnumbered[r.article_id] = r
        else:
            key = (r.article_id, r.revision)
            if key in seen:
                problems.append((r, FieldProblem("revision", f"{r.article_id} revision {r.revision} appears twice (first {_where(seen[key])})")))
            seen[key] = r
            top = newest.get(r.article_id)
            if top is None or r.revision > (top.revision or 0):
                newest[r.article_id] = r
        if r.status == "current":
            if r.article_id in current:
                problems.append((r, FieldProblem("status", (
                    f"{r.article_id} has two current revisions in this file (the other {_where(current[r.article_id])}); "
                    "at most one revision of an article is current"))))
            current[r.article_id] = r
    for aid, r in current.items():
        top = newest.get(aid)
        if r.revision is not None and top is not None and top.revision is not None and top.revision > r.revision:
            problems.append((r, FieldProblem("status", (
                f"{aid} revision {r.revision} is current but revision {top.revision} ({_where(top)}) is newer: "
                "an article's newest revision gives its state, so only the newest can be current"))))
    return problems


def _where(r: KbRecord) -> str:
    return f"at line {r.line}" if r.line else f"at index {r.index}"


def _records_of(data: bytes, *, path: str, fmt: str) -> list[Record]:
    if fmt != ".json":
        return read_records(data, path=path, fmt=fmt)
    try:
        value = loads_json(data)
    except InputLimitError as exc:
        raise RecordError(f"Refused: {exc.message}", path=path) from exc
    except ValueError as exc:
        raise RecordError(f"Invalid JSON: {exc}", path=path) from exc
    items = value if isinstance(value, list) else [value]
    return [Record(index=i, line=1 if len(items) == 1 else 0, data=item) for i, item in enumerate(items)]


def parse_kb(
    data: bytes, *, path: str, intents: tuple[str, ...] | None = None,
    formats: tuple[str, ...] = (".jsonl", ".yaml", ".yml"), required: tuple[str, ...] = FILE_REQUIRED,
) -> list[KbRecord]:
    """Parse and validate a KB file (JSONL or YAML, one revision per record); raise RecordError at the first bad one."""
    fmt = file_format(path, kind="KB", formats=formats) if Path(path).suffix else ".jsonl"
    raw = _records_of(data, path=path, fmt=fmt)
    if not raw:
        raise RecordError("the file holds no KB revisions", path=path)
    out: list[KbRecord] = []
    problems: list[tuple[int, int, str]] = []  # (index, line, message): the first bad record is named
    for record in raw:
        try:
            out.append(parse_record(record.data, index=record.index, line=record.line, required=required, intents=intents, source=path))
        except FieldProblem as exc:
            problems.append((record.index, record.line, exc.message))
            break
    problems += [(r.index, r.line, p.message) for r, p in check_together(out)]
    if problems:
        index, line, message = min(problems)
        raise _bad(index, line, path, message)
    return out


def _bad(index: int, line: int, path: str, message: str) -> RecordError:
    return RecordError(f"record {index + 1}: {message}", path=path, line=line or None)
