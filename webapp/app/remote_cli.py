"""`draftdesk remote ...` in the full install: the CI client's own commands (draftdesk_remote.cli), mounted as is.

The thin install (remote/pyproject.toml) gives the same group under its own `draftdesk`; one code, two installs.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the `remote` group (push-run, check, kb-sync)."""
    from draftdesk_remote.cli import remote_app

    app.add_typer(remote_app, name="remote")
