"""HTTP-level hostile input: bad bearer tokens, oversized and deeply nested bodies, out-of-range values, CSP."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.metrics.conftest import ev
from webapp.core.safe_input import MAX_DEPTH
from webapp.web.csp import POLICY
from webapp.web.request_limits import (
    DEFAULT_BODY_LIMIT,
    EVENTS_BODY_LIMIT,
    FAMILIES,
    UPLOAD_BODY_LIMIT,
    family_for,
)

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def test_invalid_bearer_token_gets_401_on_pages_and_api_without_redirects(client: TestClient) -> None:
    bad = {"Authorization": "Bearer dd_invalid"}
    for path in ("/gates/pilot", "/login", "/", "/api/v1/whoami", "/api/v1/alerts"):
        r = client.get(path, headers=bad, follow_redirects=False)
        assert r.status_code == 401, f"{path} -> {r.status_code} {r.headers.get('location')}"
        assert "location" not in r.headers
        assert r.headers["www-authenticate"] == "Bearer"
    # A browser without a session is still sent to sign in.
    assert client.get("/gates/pilot", follow_redirects=False).status_code == 303


def test_far_future_date_and_too_big_integer_are_422_not_500(api_as: Callable[..., TestClient]) -> None:
    assert api_as(scopes=["ingest"]).post("/api/v1/events", json=[ev("2026-11-02")]).json()["created"] == 1
    api = api_as("pm", "lead")
    for end in ("2760-01-10", "9999-12-31"):
        r = api.get("/api/v1/alerts", params={"end": end})
        assert r.status_code == 422 and "ten years" in r.text, r.text
    r = api.get("/api/v1/drafts/99999999999999999999/checks")
    assert r.status_code == 422 and "out of range" in r.text


def test_events_body_over_10_mb_is_413_before_it_is_read(api_as: Callable[..., TestClient]) -> None:
    api = api_as(scopes=["ingest"])

    declared = api.post(
        "/api/v1/events",
        content=b"[]",
        headers={"Content-Type": "application/json", "Content-Length": str(EVENTS_BODY_LIMIT + 1)},
    )
    assert declared.status_code == 413
    body = iter([b" " * (1 << 20)] * (EVENTS_BODY_LIMIT // (1 << 20) + 5))  # streamed: no length declared
    streamed = api.post("/api/v1/events", content=body, headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413, streamed.text
    # 2 MB is over the default limit but within the events limit: it reaches the route.
    padded = b"[" + b" " * (2 << 20) + b"]"
    assert api.post("/api/v1/events", content=padded, headers={"Content-Type": "application/json"}).status_code == 200


def test_other_bodies_over_1_mb_are_413(api_as: Callable[..., TestClient], client_as: Callable[..., TestClient]) -> None:
    big = json.dumps({"note": "x" * DEFAULT_BODY_LIMIT})
    r = api_as(scopes=["ingest"]).post(
        "/api/v1/events/e1/hallucination-reports", content=big, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413
    page = client_as("admin").post("/admin/users", data={"email": "x" * DEFAULT_BODY_LIMIT})
    assert page.status_code == 413


def test_admin_upload_over_the_limit_is_413_sized_or_streamed(client_as: Callable[..., TestClient]) -> None:
    admin = client_as("admin")
    over = b"- id: a\n" + b"#" * (UPLOAD_BODY_LIMIT + 1)
    r = admin.post("/admin/imports/dataset", files={"file": ("big.yaml", over, "application/yaml")})
    assert r.status_code == 413
    assert admin.get("/datasets").text.count("big.yaml") == 0
    boundary = "hostileboundary"

    def body() -> Iterator[bytes]:
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.yaml"\r\n'
            "Content-Type: application/yaml\r\n\r\n"
        ).encode()
        for _ in range(UPLOAD_BODY_LIMIT // (1 << 20) + 3):
            yield b"#" * (1 << 20)
        yield f"\r\n--{boundary}--\r\n".encode()

    r = admin.post(
        "/admin/imports/dataset", content=body(), headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    assert r.status_code == 413
    assert "Too large" in r.text  # the app's own error page: the limit hit while the parser was streaming


def test_json_body_nested_deeper_than_the_limit_is_422(api_as: Callable[..., TestClient]) -> None:
    api = api_as(scopes=["ingest"])
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    r = api.post("/api/v1/events", content=deep, headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    assert f"deeper than {MAX_DEPTH}" in r.text
    # Brackets inside strings do not count.
    r = api.post("/api/v1/events/e1/hallucination-reports", json={"note": "[" * 500})
    assert r.status_code == 404  # no such event: the body itself was fine


def test_pages_carry_a_strict_content_security_policy(client_as: Callable[..., TestClient]) -> None:
    r = client_as("lead").get("/")
    policy = r.headers["content-security-policy"]
    assert policy == POLICY
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert "unsafe-inline" not in directives["style-src"] and "unsafe-eval" not in policy
    assert directives["default-src"] == "'none'" and directives["frame-ancestors"] == "'none'"


def test_templates_hold_no_inline_script_style_or_handler() -> None:
    inline = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>|\sstyle=|\son[a-z]+=|<style|javascript:|hx-on", re.IGNORECASE)
    found = [
        f"{path.relative_to(TEMPLATES)}:{n}: {m.group(0)}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        for m in [inline.search(line)]
        if m
    ]
    assert found == []


def test_api_reference_page_has_its_own_narrow_policy(client: TestClient) -> None:
    r = client.get("/api/docs")
    assert r.status_code == 200 and "/api/openapi.json" in r.text
    policy = r.headers["content-security-policy"]
    inline = re.search(r"<script>(.*?)</script>", r.text, re.DOTALL)
    assert inline is not None
    digest = base64.b64encode(hashlib.sha256(inline.group(1).encode()).digest()).decode()
    assert f"'sha256-{digest}'" in policy and "unsafe-eval" not in policy
    # Scripts come only from where the page itself loads them (FastAPI's Swagger UI origin) and the hash.
    script_src = re.search(r"<script src=\"(https://[^/\"]+)/", r.text)
    assert script_src is not None and f"script-src {script_src.group(1)} 'sha256-" in policy


class TestBodyFamilies:
    """One body limit per route family, in one table, and a 413 that names it (issue 41)."""

    @pytest.mark.parametrize(
        ("path", "family"),
        [
            ("/api/v1/events", "events"),
            ("/api/v1/events/e1/hallucination-reports", "api"),
            ("/admin/imports/kb", "bulk"),
            ("/api/v1/kb/articles/refund-policy", "bulk"),
            ("/api/v1/kb/sync", "bulk"),
            ("/api/v1/datasets", "bulk"),
            ("/api/v1/runs/r1/drafts", "bulk"),
            ("/api/v1/runs/r1/verdict", "api"),
            ("/admin/users", "forms"),
            ("/grading/drafts/12", "forms"),
            ("/api/v1/grades", "api"),
        ],
    )
    def test_each_path_falls_into_its_family(self, path: str, family: str) -> None:
        assert family_for(path).name == family

    def test_the_limits(self) -> None:
        assert {f.name: f.limit for f in FAMILIES} == {
            "events": 10 * 1024 * 1024, "bulk": 10 * 1024 * 1024, "forms": 256 * 1024, "api": 1024 * 1024,
        }

    def test_a_form_over_256_kb_is_413_on_the_error_page_naming_the_limit(
        self, client_as: Callable[..., TestClient]
    ) -> None:
        admin = client_as("admin")
        over = admin.post("/admin/users", data={"email": "x" * (256 * 1024)})
        assert over.status_code == 413 and "Too large" in over.text and "256 kB limit" in over.text
        under = admin.post("/admin/users", data={"email": "x" * (200 * 1024)})
        assert under.status_code != 413

    def test_an_api_body_over_1_mb_is_413_json_naming_the_limit(self, api_as: Callable[..., TestClient]) -> None:
        api = api_as(scopes=["ingest"])
        over = api.post(
            "/api/v1/events/e1/hallucination-reports", content=json.dumps({"note": "x" * (1024 * 1024)}),
            headers={"Content-Type": "application/json"},
        )
        assert over.status_code == 413 and "1 MB limit" in over.json()["detail"]
        under = api.post(
            "/api/v1/events/e1/hallucination-reports", content=json.dumps({"note": "x" * (900 * 1024)}),
            headers={"Content-Type": "application/json"},
        )
        assert under.status_code == 404  # read whole: there is no event e1

    def test_a_bulk_body_over_10_mb_is_413_naming_the_limit(self, client_as: Callable[..., TestClient]) -> None:
        admin = client_as("admin")
        over = admin.post("/admin/imports/kb", files={"file": ("kb.yaml", b"#" * (11 * 1024 * 1024), "application/yaml")})
        assert over.status_code == 413 and "10 MB limit" in over.text
        under = admin.post("/admin/imports/kb", files={"file": ("kb.yaml", b"#" * (9 * 1024 * 1024), "application/yaml")})
        assert under.status_code != 413

    def test_the_events_ingest_keeps_10_mb_and_names_it(self, api_as: Callable[..., TestClient]) -> None:
        r = api_as(scopes=["ingest"]).post(
            "/api/v1/events", content=b"[]",
            headers={"Content-Type": "application/json", "Content-Length": str(EVENTS_BODY_LIMIT + 1)},
        )
        assert r.status_code == 413 and "10 MB limit for the events ingest" in r.json()["detail"]
