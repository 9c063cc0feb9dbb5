"""`prompt-evaluator`: dataset-driven evaluation (filled in by the evaluator issue)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Prompt Evaluator: dataset-driven evaluation with a generator and an LLM judge.", no_args_is_help=True)


@app.callback()
def _root() -> None:
    """Prompt Evaluator."""


def register(root: typer.Typer, import_app: typer.Typer) -> None:
    """Nothing yet: evaluate-dataset is added by the evaluator issue."""


def main() -> None:
    """Entry point of the `prompt-evaluator` console script."""
    app()
