"""Issue 41 item 5: every JSON route refuses a lone surrogate, a NUL and a key given twice with a 422 naming the field."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from webapp.core.safe_input import JsonContentError, loads_json
from webapp.datasets.records import RecordError, read_records

HOSTILE: list[tuple[bytes, str, str]] = [
    # (body, field named, what the message says)
    (b'{"note": "fine", "scores": {"tone": "\\ud800"}}', "scores.tone", "lone UTF-16 surrogate (\\ud800)"),
    (b'{"items": [{"text": "ok"}, {"text": "a\\u0000b"}]}', "items.1.text", "NUL character"),
    (b'{"tone": 5, "tone": 1}', "tone", "the key 'tone' is given twice"),
    (b'{"a": {"b": 1, "b": 2}}', "a.b", "the key 'b' is given twice"),
    (b'{"\\udfff": 1}', "(body)", "a key contains a lone UTF-16 surrogate"),
]


def _json_routes(app: Any) -> list[tuple[str, str]]:
    """Every (method, path) of the app that takes a body (its path parameters filled with 1)."""
    out = []
    for route in app.routes:
        # FastAPI 0.165 keeps included routers nested (as tests/test_route_security.py walks them)
        nested = route.effective_route_contexts() if hasattr(route, "effective_route_contexts") else [route]
        for r in nested:
            if isinstance(getattr(r, "original_route", r), APIRoute):
                path = re.sub(r"\{[^}]+\}", "1", r.path)
                out.extend((m, path) for m in sorted(r.methods & {"POST", "PUT", "PATCH", "DELETE"}))
    assert len(out) > 20, "the route walk found too few routes; has FastAPI's routing changed?"
    return out


class TestParser:
    @pytest.mark.parametrize(("body", "field", "says"), HOSTILE)
    def test_refused_naming_the_field(self, body: bytes, field: str, says: str) -> None:
        with pytest.raises(JsonContentError) as caught:
            loads_json(body)
        assert caught.value.field == field and says in caught.value.reason

    def test_clean_json_is_read_as_json_loads_reads_it(self) -> None:
        assert loads_json('{"a": [1, {"b": "é ok"}], "c": null}') == {"a": [1, {"b": "é ok"}], "c": None}
        assert loads_json('"\\ud83d\\ude00"') == "\U0001f600"  # a surrogate pair is one character


class TestEveryJsonRoute:
    @pytest.mark.parametrize(("body", "field", "says"), HOSTILE[:3])
    def test_each_route_answers_422_naming_the_field(
        self, app: FastAPI, api_as: Callable[..., TestClient], body: bytes, field: str, says: str
    ) -> None:
        api = api_as("admin", "lead", "labeler", "pm", "ml_lead", "support_lead")
        routes = _json_routes(app)
        assert ("PUT", "/api/v1/grades/1") in routes
        # POST /api/v1/events answers per event (tests/metrics/test_api.py: a NUL makes that event invalid)
        for method, path in [r for r in routes if r != ("POST", "/api/v1/events")]:
            r = api.request(method, path, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 422, (method, path, r.status_code, r.text[:200])
            if path.startswith("/api/"):
                [error] = r.json()["detail"]
                assert error["field"] == field and says in error["message"], (method, path, error)

    def test_put_grades_with_a_lone_surrogate_note_is_422_not_500(self, api_as: Callable[..., TestClient]) -> None:
        body = b'{"draft_id": 1, "factual_accuracy": "pass", "citation_relevance": 4, "tone": 4, "completeness": 4, "note": "\\ud800"}'
        r = api_as("labeler").put("/api/v1/grades/1", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["detail"] == [
            {"field": "note", "message": "contains a lone UTF-16 surrogate (\\ud800), which is not Unicode text"}
        ]


class TestDatasetFiles:
    @pytest.mark.parametrize(
        ("line", "says"),
        [('{"id": "c1", "input": "\\ud800"}', "input: contains a lone UTF-16 surrogate"),
         ('{"id": "c1", "input": "a\\u0000"}', "input: contains a NUL character"),
         ('{"id": "c1", "id": "c2"}', "id: the key 'id' is given twice")],
    )
    def test_a_jsonl_record_is_refused_naming_line_and_field(self, tmp_path: Path, line: str, says: str) -> None:
        data = ('{"id": "c0", "input": "fine"}\n' + line + "\n").encode()
        with pytest.raises(RecordError) as caught:
            read_records(data, path=tmp_path / "set.jsonl")
        assert caught.value.line == 2 and says in str(caught.value)
