"""`draftdesk gates pilot|production --run RUN [--json | --markdown]`: exit 0 only when the gate passes."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from webapp.core.cli_support import cli_session, console, load_settings
from webapp.runs.cli import run_or_exit


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the gates commands."""
    gates = typer.Typer(help="Launch gates: print the report; exit 0 only when the gate passes.", no_args_is_help=True)
    app.add_typer(gates, name="gates")

    def _run_gate(gate: str, run: str, as_json: bool, as_markdown: bool) -> None:
        from webapp.gates import service  # these load when a gate command runs, not for `draftdesk --help`
        from webapp.gates.report import to_markdown
        from webapp.gates.schemas import gate_report_public

        settings = load_settings()
        with cli_session(settings) as session:
            r = run_or_exit(session=session, ref=run)
            rep = service.report(session=session, spec=settings.eval_spec, gate=gate, run=r)
        if as_json:
            print(json.dumps(gate_report_public(rep).model_dump(mode="json"), indent=2))
        elif as_markdown:
            print(to_markdown(rep), end="")
        else:
            colour = {"pass": "green", "fail": "red", "incomplete": "yellow"}
            console.print(f"[bold]{gate.capitalize()} gate for {r.name}: [{colour[rep.status]}]{rep.status.upper()}[/]")
            table = Table("Criterion", "Measured", "Threshold", "Verdict")
            for c in rep.criteria:
                table.add_row(c.title, c.measured, c.threshold, f"[{colour[c.status]}]{c.status}[/]")
            console.print(table)
            for line in rep.missing:
                console.print(f"- {line}", highlight=False)
            for c in rep.criteria:
                if c.action:
                    console.print(" ".join(x for x in (c.action, c.command, c.link) if x), highlight=False, markup=False)
        raise typer.Exit(0 if rep.passed else 1)

    @gates.command("pilot")
    def pilot(
        run: str = typer.Option(..., "--run", help="Run name or id"),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON"),
        as_markdown: bool = typer.Option(False, "--markdown", help="Print the report as Markdown"),
    ) -> None:
        """Print the pilot gate report for a run."""
        _run_gate("pilot", run, as_json, as_markdown)

    @gates.command("production")
    def production(
        run: str = typer.Option(..., "--run", help="Run name or id (its eval set must have 250 cases)"),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON"),
        as_markdown: bool = typer.Option(False, "--markdown", help="Print the report as Markdown"),
    ) -> None:
        """Print the production gate report for a run."""
        _run_gate("production", run, as_json, as_markdown)
