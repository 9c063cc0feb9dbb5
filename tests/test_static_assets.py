"""Vendored front-end files: compressed once into a disk cache, served with Content-Length, ETag and 304."""

from __future__ import annotations

import gzip
from pathlib import Path

import brotli
import pytest
from fastapi.testclient import TestClient

from webapp import static_assets

DECODE = {"gzip": gzip.decompress, "br": brotli.decompress, None: lambda b: b}


def _raw_get(client: TestClient, name: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """GET without letting the client undo the content coding; return status, headers and the bytes sent."""
    with client.stream("GET", f"/static/vendor/{name}", headers=headers) as r:
        return r.status_code, dict(r.headers), b"".join(r.iter_raw())


@pytest.mark.parametrize("name", ["htmx.min.js", "plotly.min.js"])
@pytest.mark.parametrize(
    ("accept", "encoding"),
    [("gzip, deflate, br", "br"), ("gzip", "gzip"), ("br;q=0, gzip", "gzip"), ("identity", None), ("", None)],
)
def test_encoding_length_and_etag(client: TestClient, name: str, accept: str, encoding: str | None) -> None:
    status, headers, body = _raw_get(client, name, **{"Accept-Encoding": accept})
    assert status == 200
    assert headers.get("content-encoding") == encoding
    assert int(headers["content-length"]) == len(body)
    assert DECODE[encoding](body) == static_assets.VENDOR_FILES[name].read_bytes()
    assert "Accept-Encoding" in headers["vary"]
    assert "immutable" in headers["cache-control"]
    assert headers["etag"].startswith('"') and headers["etag"].endswith('"')


def test_each_encoding_has_its_own_etag(client: TestClient) -> None:
    tags = {enc: _raw_get(client, "htmx.min.js", **{"Accept-Encoding": enc})[1]["etag"] for enc in ("br", "gzip", "identity")}
    assert len(set(tags.values())) == 3


def test_if_none_match_gives_304_without_body(client: TestClient) -> None:
    _, headers, _ = _raw_get(client, "plotly.min.js", **{"Accept-Encoding": "gzip"})
    etag = headers["etag"]
    status, again, body = _raw_get(client, "plotly.min.js", **{"Accept-Encoding": "gzip", "If-None-Match": etag})
    assert (status, body, again["etag"]) == (304, b"", etag)
    status, _, _ = _raw_get(client, "plotly.min.js", **{"Accept-Encoding": "gzip", "If-None-Match": f"W/{etag}, \"x\""})
    assert status == 304
    # a tag of another encoding (or an older file) gets the full file
    status, _, body = _raw_get(client, "plotly.min.js", **{"Accept-Encoding": "br", "If-None-Match": etag})
    assert status == 200 and len(body) > 100_000


def test_compressed_once_then_reused_from_disk(client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(static_assets, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(static_assets, "_variants", {})
    calls: list[str] = []
    real = static_assets._compress

    def counting(data: bytes, encoding: str) -> bytes:
        calls.append(encoding)
        return real(data, encoding)

    monkeypatch.setattr(static_assets, "_compress", counting)
    for _ in range(3):
        assert _raw_get(client, "htmx.min.js", **{"Accept-Encoding": "gzip"})[0] == 200
    assert sorted(calls) == ["br", "gzip"]
    assert sorted(p.suffix for p in (tmp_path / "cache").iterdir()) == [".br", ".gz"]
    # a new process (nothing in memory) finds the compressed copies on disk
    monkeypatch.setattr(static_assets, "_variants", {})
    _, headers, body = _raw_get(client, "htmx.min.js", **{"Accept-Encoding": "br"})
    assert len(calls) == 2
    assert brotli.decompress(body) == static_assets.VENDOR_FILES["htmx.min.js"].read_bytes()


def test_accept_encoding_parsing() -> None:
    assert static_assets.accepted_encodings("gzip;q=0.5, br;q=0, identity") == {"gzip", "identity"}
    assert static_assets.accepted_encodings("GZIP") == {"gzip"}
    assert static_assets.accepted_encodings("") == set()


def test_metrics_page_loads_plotly_from_the_wheel(client_as) -> None:  # type: ignore[no-untyped-def]
    html = client_as("support_lead").get("/metrics").text
    # metrics.js loads the wheel's plotly.js after the page; no <script> in the page waits for it
    assert '<script src="/static/js/metrics.js" data-plotly-src="/static/vendor/plotly.min.js" async></script>' in html
    assert '<script src="/static/vendor/plotly.min.js"' not in html
