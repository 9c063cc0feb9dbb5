"""Helpers shared by the import tests of datasets, kb and runs: run the CLI on the test database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import select
from typer.testing import CliRunner

from webapp.app.cli import app as cli_app


def invoke(monkeypatch: pytest.MonkeyPatch, db_url: str, args: list[str]):  # type: ignore[no-untyped-def]
    """Run `draftdesk ARGS` against the test database (its schema is built by the test harness)."""
    monkeypatch.setenv("DRAFTDESK_DATABASE_URL", db_url)
    monkeypatch.setenv("DRAFTDESK_MODE", "dev")
    # The test database is made with create_all, not migrations; skip the CLI's upgrade step.
    monkeypatch.setattr("webapp.core.migrations_runner.upgrade", lambda *a, **k: None)
    return CliRunner().invoke(cli_app, args)


def write_jsonl(path: Path, records: list[Any]) -> Path:
    """Write records as JSONL (strings are written as raw lines)."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def count_rows(session, model) -> int:  # type: ignore[no-untyped-def]
    """Count the rows of a table from a fresh transaction."""
    session.rollback()
    return session.exec(select(func.count()).select_from(model)).one()
