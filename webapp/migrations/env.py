"""Alembic environment: the schema is SQLModel.metadata of every domain's models."""

from __future__ import annotations

from logging.config import fileConfig

import sqlmodel
from alembic import context

from webapp.core.db import make_engine
from webapp.core.models import metadata

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name)


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from webapp.core.config import Settings

    return Settings(mode="dev").database_url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(_url())
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
            user_module_prefix="sqlmodel.sql.sqltypes.",
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


_ = sqlmodel  # generated migrations refer to sqlmodel.sql.sqltypes
if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
