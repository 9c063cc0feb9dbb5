"""A golden case without expectation fields is warned about at import (CLI FILE:LINE, admin upload) and on the gate.

Hand-worked file (one JSON object per line):
  line 1: g-happy   golden, routine, expected_confidence_above 0.8: states its expectations, no warning
  line 2: g-bare    golden, routine, no expectation field: warned (the case-expectations check would not run)
  line 3: g-refund  golden, adversarial, expects a fallback: expected behaviour judges it, no warning
  line 4: g-safety  golden, safety (its category expects an escalation): no warning
  line 5: r1        not golden, no field: no warning
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.factories import make_run
from webapp.core.spec import EvalSpec
from webapp.datasets import service
from webapp.gates import service as gates_service

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    {"id": "g-happy", "input": "q", "category": "routine", "intent": "billing_charge", "golden": True, "expected_confidence_above": 0.8},
    {"id": "g-bare", "input": "q", "category": "routine", "intent": "billing_charge", "golden": True},
    {"id": "g-refund", "input": "q", "category": "adversarial", "intent": "refund_request", "golden": True, "expected_behavior": "fallback"},
    {"id": "g-safety", "input": "q", "category": "safety", "intent": "cancellation", "golden": True},
    {"id": "r1", "input": "q", "category": "routine", "intent": "billing_charge"},
]
WARNING = (
    "golden case 'g-bare' states no expectation fields (expected_confidence_above, expected_confidence_min, "
    "expected_confidence_max, expected_citations): the case-expectations check does not run on it"
)


def jsonl(cases: list[dict]) -> bytes:
    return "".join(json.dumps(c) + "\n" for c in cases).encode()


def test_import_warns_only_about_the_golden_case_without_expectations(session: Session, spec: EvalSpec) -> None:
    result = service.import_dataset(session=session, data=jsonl(CASES), path="golden.jsonl", spec=spec)
    assert result.created and result.dataset.count == 5  # a warning, never a refusal
    assert [(w.line, w.case_id, w.message) for w in result.case_warnings] == [(2, "g-bare", WARNING)]
    assert f"line 2: {WARNING}" in result.warnings


def test_cli_names_file_and_line_on_stderr(session: Session, db_url: str, tmp_path: Path) -> None:
    session.commit()
    path = tmp_path / "golden.jsonl"
    path.write_bytes(jsonl(CASES))
    env = {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_MODE": "dev"}
    proc = subprocess.run(
        [sys.executable, "-c", "from webapp.app.cli import main; main()", "import", "dataset", str(path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "golden version 1 imported" in proc.stdout
    assert f"warning: {path}:2: {WARNING}" in proc.stderr
    assert "g-happy" not in proc.stderr and "g-refund" not in proc.stderr and "g-safety" not in proc.stderr


def test_admin_upload_shows_the_warning(client_as: Callable[..., TestClient]) -> None:
    r = client_as("admin").post("/admin/imports/dataset", files={"file": ("golden.jsonl", jsonl(CASES))}, data={"name": "g"})
    assert r.status_code == 200 and "g version 1 imported" in r.text
    assert "line 2: golden case &#39;g-bare&#39; states no expectation fields" in r.text


def test_the_gate_warns_on_the_golden_criterion(session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
    ds = service.import_dataset(session=session, data=jsonl(CASES), path="golden.jsonl", spec=spec).dataset
    run = make_run(session, ds, [{"case_id": "g-bare", "draft_text": "hello", "confidence": 0.9}], name="golden-run")
    session.commit()
    golden = next(c for c in gates_service.pilot_report(session=session, spec=spec, run=run).criteria if c.key == "golden_factual")
    warned = [e for e in golden.evidence if e.detail.startswith("warning:")]
    assert [(e.label, e.href) for e in warned] == [("g-bare", f"/datasets/{ds.id}/cases/g-bare")]
    assert WARNING in warned[0].detail
    page = client_as("lead").get(f"/gates/pilot?run={run.name}")
    assert page.status_code == 200 and "g-bare" in page.text and "states no expectation fields" in page.text
