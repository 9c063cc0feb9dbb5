"""The Alembic migrations build exactly the schema the models describe, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url

from tests.conftest import BACKENDS, PG_URL
from webapp.core.db import make_engine
from webapp.core.migrations_runner import current_heads, upgrade
from webapp.core.models import metadata


@pytest.fixture(params=BACKENDS)
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database: a new SQLite file, or a new PostgreSQL database dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrated.db'}"
        return
    name = f"dd_migrations_{uuid.uuid4().hex[:10]}"
    admin = make_engine(PG_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_upgrade_head_matches_the_models(empty_db_url: str) -> None:
    upgrade(empty_db_url)
    upgrade(empty_db_url)  # idempotent: a second run finds nothing to do
    engine = make_engine(empty_db_url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(ctx, metadata)
            assert diff == [], f"models and migrations disagree: {diff}"
            assert ctx.get_current_heads() == tuple(current_heads(empty_db_url))
        tables = set(inspect(engine).get_table_names())
        assert {t.name for t in metadata.sorted_tables} <= tables
    finally:
        engine.dispose()


def test_migrated_regression_suite_is_append_only(empty_db_url: str) -> None:
    upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO app_user (email, name, password_hash, is_active, created_at) VALUES ('a@x.test', '', 'h', true, '2026-01-01')"))
            conn.execute(text(
                "INSERT INTO regression_case (case_id, input, note, source, created_by, created_at) "
                "VALUES ('c1', 'in', 'why', 'golden', (SELECT id FROM app_user), '2026-01-01')"
            ))
        for sql in ("UPDATE regression_case SET note = 'changed'", "DELETE FROM regression_case"):
            with pytest.raises(Exception, match="append-only"), engine.begin() as conn:
                conn.execute(text(sql))
        with engine.connect() as conn:
            assert conn.execute(text("SELECT note FROM regression_case")).scalar_one() == "why"
    finally:
        engine.dispose()
