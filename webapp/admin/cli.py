"""Admin commands: `draftdesk demo` (webapp/demo is not a domain of its own, so it is registered here)."""

from __future__ import annotations

import typer


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the demo command."""
    from webapp.demo import cli as demo_cli

    demo_cli.register(app, import_app)
