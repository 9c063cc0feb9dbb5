"""Vendored front-end files: served from node_modules, gzipped once per process, with Content-Length, ETag and 304."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from webapp.web import static_assets

DECODE = {"gzip": gzip.decompress, None: lambda b: b}


def _raw_get(client: TestClient, name: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """GET without letting the client undo the content coding; return status, headers and the bytes sent."""
    with client.stream("GET", f"/static/vendor/{name}", headers=headers) as r:
        return r.status_code, dict(r.headers), b"".join(r.iter_raw())


@pytest.mark.parametrize("name", ["htmx.min.js", "plotly-basic.min.js"])
@pytest.mark.parametrize(
    ("accept", "encoding"),
    [("gzip, deflate, br", "gzip"), ("gzip", "gzip"), ("br", None), ("identity", None), ("", None)],
)
def test_encoding_length_and_etag(client: TestClient, name: str, accept: str, encoding: str | None) -> None:
    status, headers, body = _raw_get(client, name, **{"Accept-Encoding": accept})
    assert status == 200
    assert headers.get("content-encoding") == encoding
    assert int(headers["content-length"]) == len(body)
    raw = static_assets.VENDOR_FILES[name].read_bytes()
    assert DECODE[encoding](body) == raw
    assert encoding is None or len(body) < len(raw) / 2  # gzip really shrinks the file
    assert "Accept-Encoding" in headers["vary"]
    assert "immutable" in headers["cache-control"] and "max-age=31536000" in headers["cache-control"]
    assert headers["etag"].startswith('"') and headers["etag"].endswith('"')


def test_if_none_match_gives_304_without_body(client: TestClient) -> None:
    _, headers, _ = _raw_get(client, "plotly-basic.min.js", **{"Accept-Encoding": "gzip"})
    etag = headers["etag"]
    status, again, body = _raw_get(client, "plotly-basic.min.js", **{"Accept-Encoding": "gzip", "If-None-Match": etag})
    assert (status, body, again["etag"]) == (304, b"", etag)
    status, _, _ = _raw_get(client, "plotly-basic.min.js", **{"Accept-Encoding": "gzip", "If-None-Match": f"W/{etag}, \"x\""})
    assert status == 304
    # each encoding has its own tag: a tag of another encoding (or an older file) gets the full file
    status, plain, body = _raw_get(
        client, "plotly-basic.min.js", **{"Accept-Encoding": "identity", "If-None-Match": etag}
    )
    assert status == 200 and len(body) > 100_000 and plain["etag"] != etag


def test_compressed_once_per_process(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(static_assets, "_variants", {})
    calls: list[bytes] = []
    real = gzip.compress

    def counting(data: bytes, **kwargs: int) -> bytes:
        calls.append(data)
        return real(data, **kwargs)

    monkeypatch.setattr(static_assets.gzip, "compress", counting)
    for _ in range(3):
        assert _raw_get(client, "htmx.min.js", **{"Accept-Encoding": "gzip"})[0] == 200
    assert calls == [static_assets.VENDOR_FILES["htmx.min.js"].read_bytes()]


def test_absent_file_is_404(client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert client.get("/static/vendor/jquery.js").status_code == 404
    # a file the app knows but that is not installed names the setup step
    monkeypatch.setitem(static_assets.VENDOR_FILES, "htmx.min.js", tmp_path / "missing.js")
    r = client.get("/static/vendor/htmx.min.js")
    assert r.status_code == 404 and "./dev setup" in r.text


def test_accept_encoding_parsing() -> None:
    assert static_assets.accepted_encodings("gzip;q=0.5, br;q=0, identity") == {"gzip", "identity"}
    assert static_assets.accepted_encodings("GZIP") == {"gzip"}
    assert static_assets.accepted_encodings("") == set()


def test_plotly_is_the_basic_bundle_from_its_npm_package() -> None:
    import json

    from webapp.core.config import PROJECT_ROOT

    package = json.loads((PROJECT_ROOT / "package.json").read_text())
    assert "plotly.js-basic-dist-min" in package["dependencies"]
    path = static_assets.VENDOR_FILES["plotly-basic.min.js"]
    assert path.parent.name == "plotly.js-basic-dist-min" and "node_modules" in path.parts
    assert b"plotly.js (basic" in path.read_bytes()[:200]  # tests/metrics/test_pages.py: /metrics loads it
