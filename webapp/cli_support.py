"""Shared pieces of the CLI: settings, a database session, and error reporting."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from sqlmodel import Session

from webapp.config import Settings
from webapp.db import make_engine, session_scope

console = Console()
err_console = Console(stderr=True)


def load_settings() -> Settings:
    """Return settings from the environment; the CLI is an operator's tool, so dev mode is allowed."""
    import os

    mode = os.environ.get("DRAFTDESK_MODE", "dev")
    return Settings(mode=mode)  # type: ignore[arg-type]


@contextmanager
def cli_session(settings: Settings | None = None) -> Iterator[Session]:
    """Open one transaction on the configured database (migrated first)."""
    from webapp.migrations_runner import upgrade

    settings = settings or load_settings()
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with session_scope(engine) as session:
            yield session
    finally:
        engine.dispose()


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an error to stderr and exit with the code (2: bad input or usage)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code)


def read_password_from_stdin_or_prompt(prompt: str = "Password") -> str:
    """Read a password from standard input when it is not a terminal, else prompt twice."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    return typer.prompt(prompt, hide_input=True, confirmation_prompt=True)
