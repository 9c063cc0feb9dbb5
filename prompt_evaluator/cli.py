"""The `prompt-evaluator` command (also `python -m prompt_evaluator`)."""

from webapp.evaluator.cli import app, main

__all__ = ["app", "main"]
