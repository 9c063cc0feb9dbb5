"""The eval set's mix against the plan's stratified sample (60/20/10/10) and its top-10 intents, worked by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.factories import make_dataset
from webapp.core.spec import EvalSpec
from webapp.datasets import service
from webapp.datasets.mix import dataset_mix
from webapp.datasets.models import EvalCase

ROOT = Path(__file__).resolve().parents[2]

def rows(routine: int, edge: int, adversarial: int, safety: int, intent: str = "billing_charge") -> list[tuple[str, str | None, str | None]]:
    out: list[tuple[str, str | None, str | None]] = []
    for cat, n in (("routine", routine), ("edge", edge), ("adversarial", adversarial), ("safety", safety)):
        out += [(f"{cat}-{i}", cat, intent) for i in range(n)]
    return out


class TestDatasetMix:
    def test_the_planned_mix_matches(self, spec: EvalSpec) -> None:
        mix = dataset_mix(rows(60, 20, 10, 10), spec)
        assert mix.matches_plan and mix.warnings() == []
        assert [(c.category, c.count, c.share, c.planned) for c in mix.categories] == [
            ("routine", 60, 0.6, 0.6), ("edge", 20, 0.2, 0.2), ("adversarial", 10, 0.1, 0.1), ("safety", 10, 0.1, 0.1)
        ]

    def test_five_points_off_is_within_six_is_not(self, spec: EvalSpec) -> None:
        # 55/25/10/10: routine -5 pts, edge +5 pts: on the edge of the tolerance, still within.
        assert dataset_mix(rows(55, 25, 10, 10), spec).matches_plan
        # 54/26/10/10: routine -6 pts, edge +6 pts: outside.
        off = dataset_mix(rows(54, 26, 10, 10), spec)
        assert not off.matches_plan
        assert [round(c.deviation_points, 6) for c in off.categories] == [-6.0, 6.0, 0.0, 0.0]
        assert off.mismatches() == [
            "the category mix does not match the plan's stratified sample: routine 54.0% (plan 60% ± 5 pts), edge 26.0% (plan 20% ± 5 pts)"
        ]

    def test_an_all_routine_set_does_not_match(self, spec: EvalSpec) -> None:
        mix = dataset_mix(rows(100, 0, 0, 0), spec)
        assert not mix.mix_matches and mix.intents_match
        assert mix.mix_text() == "routine 100 (100.0%), edge 0 (0.0%), adversarial 0 (0.0%), safety 0 (0.0%)"
        assert mix.warnings()[0].startswith("the category mix does not match the plan's stratified sample: routine 100.0% (plan 60% ± 5 pts), edge 0.0%")

    def test_an_intent_outside_the_ten_is_named_with_its_cases(self, spec: EvalSpec) -> None:
        data = rows(60, 20, 10, 10)
        data[3] = ("routine-3", "routine", "shipping_delay")
        data[70] = ("edge-10", "edge", "shipping_delay")
        data[90] = ("safety-0", "safety", None)
        mix = dataset_mix(data, spec)
        assert mix.mix_matches and not mix.intents_match and not mix.matches_plan
        assert mix.off_plan_intents == {"shipping_delay": ("routine-3", "edge-10")}
        assert mix.warnings() == [
            "intent 'shipping_delay' is not one of the plan's top-10 intents: 2 cases (routine-3, edge-10)",
            "1 case (safety-0) has no intent label",
        ]
        # A missing intent is reported, but does not make the set mismatch.
        assert mix.mismatches() == mix.warnings()[:1]

    def test_a_case_without_category_counts_in_the_total_only(self, spec: EvalSpec) -> None:
        data = rows(59, 20, 10, 10) + [("x-1", None, "billing_charge")]
        mix = dataset_mix(data, spec)
        assert mix.total == 100 and mix.categories[0].share == pytest.approx(0.59)
        assert not mix.matches_plan and "1 case (x-1) has no category (routine, edge, adversarial or safety)" in mix.mismatches()


def jsonl(cases: Sequence[Mapping[str, object]]) -> bytes:
    return "".join(json.dumps(c) + "\n" for c in cases).encode()


ALL_ROUTINE = [{"id": f"r{i}", "input": "q", "category": "routine", "intent": "billing_charge"} for i in range(9)] + [
    {"id": "r9", "input": "q", "category": "routine", "intent": "shipping_delay"}
]


class TestImportWarns:
    def test_import_succeeds_and_says_what_departs_from_the_plan(self, session: Session, spec: EvalSpec) -> None:
        result = service.import_dataset(session=session, data=jsonl(ALL_ROUTINE), path="all-routine.jsonl", spec=spec)
        assert result.created and result.dataset.count == 10
        assert len(session.exec(select(EvalCase).where(EvalCase.dataset_id == result.dataset.id)).all()) == 10
        assert result.warnings == [
            "the category mix does not match the plan's stratified sample: routine 100.0% (plan 60% ± 5 pts), "
            "edge 0.0% (plan 20% ± 5 pts), adversarial 0.0% (plan 10% ± 5 pts), safety 0.0% (plan 10% ± 5 pts)",
            "intent 'shipping_delay' is not one of the plan's top-10 intents: 1 case (r9)",
        ]

    def test_cli_prints_the_warnings_and_exits_0(self, session: Session, db_url: str, tmp_path: Path) -> None:
        # The test database is stamped at the head revision (tests/conftest.py), so the CLI's
        # migrate-first finds nothing to do; it must stay stamped for the tests that follow.
        session.commit()
        path = tmp_path / "all-routine.jsonl"
        path.write_bytes(jsonl(ALL_ROUTINE))
        env = {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_MODE": "dev"}
        proc = subprocess.run(
            [sys.executable, "-c", "from webapp.app.cli import main; main()", "import", "dataset", str(path)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        assert "all-routine version 1 imported" in proc.stdout
        assert f"warning: {path}: intent 'shipping_delay' is not one of the plan's top-10 intents: 1 case (r9)" in proc.stderr
        assert f"warning: {path}: the category mix does not match the plan's stratified sample: routine 100.0%" in proc.stderr

    def test_admin_upload_shows_the_warnings(self, client_as: Callable[..., TestClient]) -> None:
        r = client_as("admin").post("/admin/imports/dataset", files={"file": ("eval.jsonl", jsonl(ALL_ROUTINE))}, data={"name": "s"})
        assert r.status_code == 200 and "s version 1 imported" in r.text
        assert "does not match the evaluation plan" in r.text and "intent &#39;shipping_delay&#39; is not one of" in r.text


class TestDatasetPage:
    def test_the_page_shows_the_mix_against_the_plan(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        cases = [{"case_id": f"r{i}", "input": "q", "category": "routine", "intent": "billing_charge"} for i in range(3)]
        cases.append({"case_id": "e1", "input": "q", "category": "edge", "intent": "shipping_delay"})
        ds = make_dataset(session, cases)
        session.commit()
        r = client_as("pm").get(f"/datasets/{ds.id}")
        assert r.status_code == 200
        page = r.text
        assert 'id="dataset-mix"' in page and "does not match" in page
        # 3 of 4 routine = 75.0% against 60%: +15.0 pts; 1 of 4 edge = 25.0% against 20%: +5.0 pts (within).
        assert "<td>routine</td><td>3</td><td>75.0%</td>" in page and "+15.0 pts" in page and "+5.0 pts" in page
        assert "intent &#39;shipping_delay&#39; is not one of the plan&#39;s top-10 intents: 1 case (e1)" in page
