"""Limits on request bodies: sizes per route (413, enforced by FastAPI while reading) and JSON nesting (422).

FastAPI's `max_body_size` (app-wide default, raised per route) checks Content-Length before
reading and counts the bytes as they arrive, so a body over its limit is never read whole and a
multipart upload stops streaming into its temporary file at the limit. `json_depth_guard` then
refuses JSON bodies that nest deeper than safe_input.MAX_DEPTH before any handler sees them.
"""

from __future__ import annotations

import re

import numpy as np
from fastapi import HTTPException, Request

from webapp.safe_input import MAX_DEPTH

MB = 1024 * 1024
DEFAULT_BODY_LIMIT = 1 * MB
EVENTS_BODY_LIMIT = 10 * MB
# The admin's import files may be up to 50 MB; the multipart envelope and form fields get 1 MB more.
UPLOAD_FILE_LIMIT = 50 * MB
UPLOAD_BODY_LIMIT = UPLOAD_FILE_LIMIT + MB

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPENERS = np.frombuffer(b"[{", dtype=np.uint8)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def json_depth(body: bytes) -> int:
    """Return how deeply arrays/objects nest in a JSON text, without parsing it (linear, no recursion)."""
    brackets = _JSON_STRING.sub(b'""', body).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    arr = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where(np.isin(arr, _OPENERS), 1, -1).astype(np.int64)
    return int(np.cumsum(steps).max())


async def json_depth_guard(request: Request) -> None:
    """Refuse (422) a JSON request body nested deeper than MAX_DEPTH levels."""
    if request.method not in _BODY_METHODS:
        return
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json" and not ctype.endswith("+json"):
        return
    if json_depth(await request.body()) > MAX_DEPTH:
        raise HTTPException(422, detail=[{"field": "(body)", "message": f"JSON nested deeper than {MAX_DEPTH} levels"}])
