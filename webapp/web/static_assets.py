"""Serve third-party front-end files from their npm packages in node_modules, never from the repository.

package.json names them (pinned, no lock file; `npm install` in `./dev setup` installs them):
htmx (`htmx.org`) and plotly.js's basic bundle (`plotly.js-basic-dist-min`: scatter, bar and pie
traces, about 1.2 MB, which is all the metrics charts use; the full bundle is four times that).
Each file is read and gzipped once per process, in memory, at its first request (a few tens of
milliseconds for plotly.js). Responses carry Content-Length, a strong ETag per encoding (304 on a
matching If-None-Match) and a one-year immutable cache header.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from webapp.core.config import ASSET_ROOT

router = APIRouter()

NODE_MODULES = ASSET_ROOT / "node_modules"
VENDOR_FILES: dict[str, Path] = {
    "htmx.min.js": NODE_MODULES / "htmx.org" / "dist" / "htmx.min.js",
    "plotly-basic.min.js": NODE_MODULES / "plotly.js-basic-dist-min" / "plotly-basic.min.js",
}
CACHE = "public, max-age=31536000, immutable"
GZIP_LEVEL = 9


@dataclass(frozen=True)
class Variant:
    """One representation of a vendored file: its bytes, content coding and ETag."""

    body: bytes
    encoding: str | None  # None = identity
    etag: str


_variants: dict[str, dict[str | None, Variant]] = {}
_lock = threading.Lock()


def variants(name: str) -> dict[str | None, Variant]:
    """Return a vendored file as it is and gzipped, reading and compressing it at the first call."""
    known = _variants.get(name)
    if known is not None:
        return known
    with _lock:
        if name not in _variants:
            data = VENDOR_FILES[name].read_bytes()
            digest = hashlib.sha256(data).hexdigest()[:20]
            _variants[name] = {
                None: Variant(data, None, f'"{digest}"'),
                "gzip": Variant(gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0), "gzip", f'"{digest}-gz"'),
            }
        return _variants[name]


def accepted_encodings(header: str) -> set[str]:
    """Return the content codings an Accept-Encoding header allows (q=0 excludes one)."""
    out: set[str] = set()
    for part in header.split(","):
        coding, _, params = part.strip().partition(";")
        coding = coding.strip().lower()
        q = 1.0
        for p in params.split(";"):
            key, _, value = p.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if coding and q > 0:
            out.add(coding)
    return out


def _matches(if_none_match: str, etag: str) -> bool:
    tags = [t.strip().removeprefix("W/") for t in if_none_match.split(",")]
    return "*" in tags or etag in tags


@router.get("/static/vendor/{name}", include_in_schema=False)
def vendor_file(name: str, request: Request) -> Response:
    """Serve a vendored front-end file from its npm package, gzipped when accepted (public: scripts load before login)."""
    path = VENDOR_FILES.get(name)
    if path is None or not path.is_file():
        raise HTTPException(404, f"{name} is not installed; run ./dev setup")
    stored = variants(name)
    gzipped = "gzip" in accepted_encodings(request.headers.get("accept-encoding", ""))
    variant = stored["gzip"] if gzipped else stored[None]
    headers = {"Cache-Control": CACHE, "ETag": variant.etag, "Vary": "Accept-Encoding"}
    if _matches(request.headers.get("if-none-match", ""), variant.etag):
        return Response(status_code=304, headers=headers)
    if variant.encoding:
        headers["Content-Encoding"] = variant.encoding
    return Response(variant.body, media_type="text/javascript", headers=headers)
