"""Run Alembic migrations programmatically (used by `draftdesk db upgrade`, serve and demo)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "migrations"


def alembic_config(database_url: str) -> Config:
    """Return an Alembic config for the package's migrations and the given database."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    cfg.attributes["configure_logger"] = False
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    """Apply pending migrations up to `revision`."""
    command.upgrade(alembic_config(database_url), revision)


def current_heads(database_url: str) -> list[str]:
    """Return the script heads (the revisions a fully migrated database is at)."""
    from alembic.script import ScriptDirectory

    return list(ScriptDirectory.from_config(alembic_config(database_url)).get_heads())
