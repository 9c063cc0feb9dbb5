"""Shared pieces of the CLI: settings, a database session, the run lookup, and error reporting.

This module is imported by every command before it does anything, so it imports nothing heavy at
the top (no SQLModel, pydantic settings or FastAPI): a command that refuses bad input can do so
before those load (see webapp/app/cli.py for why start-up time matters).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import typer
from rich.console import Console

if TYPE_CHECKING:
    from sqlmodel import Session

    from webapp.core.config import Settings

console = Console()
err_console = Console(stderr=True)


def load_settings() -> Settings:
    """Return settings from the environment; the CLI is an operator's tool, so dev mode is allowed."""
    from webapp.core.config import Settings

    mode = os.environ.get("DRAFTDESK_MODE", "dev")
    return Settings(mode=mode)  # type: ignore[arg-type]


@contextmanager
def cli_session(settings: Settings | None = None) -> Iterator[Session]:
    """Open one transaction on the configured database (migrated first); after its commit, run the reactions to its facts."""
    from webapp.core.db import make_engine, session_scope
    from webapp.core.facts import ON_FACTS
    from webapp.core.migrations_runner import upgrade

    settings = settings or load_settings()
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    wrote: list[bool] = []
    try:
        with session_scope(engine) as session:
            session.info[ON_FACTS] = lambda _session: wrote.append(True)
            yield session
        if wrote:
            # Decision: a command has no jobs loop, so it runs the reactions to its facts (and any
            # other due ones) right after its commit; a running `serve` would otherwise pick them up.
            from webapp.core.reactions import run_pending

            run_pending(engine, settings.eval_spec)
    finally:
        engine.dispose()


class ClosedPipeGuard:
    """Standard output that, once its reader has gone (`| head -1`), drops what is written instead of raising.

    Every command commits its work before it prints; with this guard a closed pipe then ends the
    output quietly and the command still exits with its own code (not a BrokenPipeError traceback,
    nor the 1 that click reports for EPIPE).
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def _gone(self) -> None:
        self.reader_gone = True
        # Point the descriptor at /dev/null, so text still buffered in the stream (flushed at exit)
        # goes nowhere instead of raising again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def write(self, text: str) -> int:
        """Write, or drop the text once the reader has gone."""
        if self.reader_gone:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        """Flush, quietly when the reader has gone."""
        if self.reader_gone:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Make standard output survive a closed pipe (called by the console scripts' entry points)."""
    if not isinstance(sys.stdout, ClosedPipeGuard) and sys.stdout is not None:
        sys.stdout = ClosedPipeGuard(sys.stdout)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an error to stderr and exit with the code (2: bad input or usage)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code)


def read_password_from_stdin_or_prompt(prompt: str = "Password") -> str:
    """Read a password from standard input when it is not a terminal, else prompt twice."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    return typer.prompt(prompt, hide_input=True, confirmation_prompt=True)
