"""The `prompt-evaluator` command (also `python -m prompt_evaluator`).

`evaluate-dataset` and `cache` are the evaluator's (webapp/evaluator/cli.py); `judge-run` is the
judge pass of PPI (webapp/ppi/judge_cli.py), added here because the evaluator domain does not
import PPI.
"""

from webapp.evaluator.cli import app, main
from webapp.ppi.judge_cli import judge_run

app.command("judge-run")(judge_run)

__all__ = ["app", "main"]
