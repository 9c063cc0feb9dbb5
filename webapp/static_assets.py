"""Serve third-party front-end files from their installed packages, never from the repository.

htmx comes from the npm package `htmx.org` in node_modules (installed by `./dev setup`) and
plotly.js from the installed `plotly` Python wheel (the house rule: never another copy of it). Each file is compressed once (gzip,
and brotli when the `brotli` package is installed) into a cache on disk beside node_modules,
keyed by the file's content hash, so a package upgrade makes new copies and several server
processes share them. Responses carry Content-Length, a strong ETag per encoding (304 on a
matching If-None-Match) and a one-year immutable cache header.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import plotly
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, Response

from webapp.config import PROJECT_ROOT

try:  # optional: browsers prefer brotli, about a fifth smaller than gzip for plotly.js
    import brotli
except ImportError:  # pragma: no cover - depends on what is installed
    brotli = None

router = APIRouter()

VENDOR_FILES: dict[str, Path] = {
    "htmx.min.js": PROJECT_ROOT / "node_modules" / "htmx.org" / "dist" / "htmx.min.js",
    "plotly.min.js": Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
}
CACHE = "public, max-age=31536000, immutable"
# Beside the npm packages (not in the repository: node_modules is ignored), where tools keep caches.
CACHE_DIR = PROJECT_ROOT / "node_modules" / ".cache" / "draftdesk-static"
GZIP_LEVEL = 9
BROTLI_QUALITY = 11


@dataclass(frozen=True)
class Variant:
    """One stored representation of a vendored file."""

    path: Path
    encoding: str | None  # None = identity
    etag: str
    size: int


_variants: dict[str, dict[str | None, Variant]] = {}
_lock = threading.Lock()


def _compress(data: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
    assert brotli is not None
    return brotli.compress(data, quality=BROTLI_QUALITY)


def _cache_dir() -> Path:
    try:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        if os.access(CACHE_DIR, os.W_OK):
            return CACHE_DIR
    except OSError:
        pass
    fallback = Path(tempfile.gettempdir()) / f"draftdesk-static-{os.getuid()}"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def encodings() -> tuple[str, ...]:
    """Return the encodings stored besides identity (brotli only when the package is installed)."""
    return ("br", "gzip") if brotli is not None else ("gzip",)


def prepare(name: str) -> dict[str | None, Variant]:
    """Return the stored variants of a vendored file, compressing into the disk cache what is missing."""
    known = _variants.get(name)
    if known is not None:
        return known
    with _lock:
        if name in _variants:
            return _variants[name]
        source = VENDOR_FILES[name]
        data = source.read_bytes()
        digest = hashlib.sha256(data).hexdigest()[:20]
        out: dict[str | None, Variant] = {None: Variant(source, None, f'"{digest}"', len(data))}
        cache = _cache_dir()
        for enc in encodings():
            suffix = {"gzip": "gz", "br": "br"}[enc]
            path = cache / f"{name}.{digest}.{suffix}"
            if not path.is_file():
                # written aside then renamed: another process never reads a half-written file
                fd, tmp = tempfile.mkstemp(dir=cache, prefix=f".{name}.")
                with os.fdopen(fd, "wb") as fh:
                    fh.write(_compress(data, enc))
                os.chmod(tmp, 0o644)
                os.replace(tmp, path)
            out[enc] = Variant(path, enc, f'"{digest}-{suffix}"', path.stat().st_size)
        _variants[name] = out
        return out


def prepare_all() -> None:
    """Compress every installed vendored file into the disk cache (run by ./dev setup)."""
    for name, path in VENDOR_FILES.items():
        if path.is_file():
            prepare(name)


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
    """Serve a vendored front-end file from its package, precompressed (public: scripts load before login)."""
    path = VENDOR_FILES.get(name)
    if path is None or not path.is_file():
        raise HTTPException(404, f"{name} is not installed; run ./dev setup")
    variants = prepare(name)
    accepted = accepted_encodings(request.headers.get("accept-encoding", ""))
    variant = next((variants[e] for e in encodings() if e in accepted), variants[None])
    headers = {"Cache-Control": CACHE, "ETag": variant.etag, "Vary": "Accept-Encoding"}
    if _matches(request.headers.get("if-none-match", ""), variant.etag):
        return Response(status_code=304, headers=headers)
    if variant.encoding:
        headers["Content-Encoding"] = variant.encoding
    # FileResponse sends Content-Length from the file's size; the stored file is sent as it is
    return FileResponse(variant.path, media_type="text/javascript", headers=headers, stat_result=None)


if __name__ == "__main__":
    prepare_all()
