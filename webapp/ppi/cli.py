"""`draftdesk ppi production-week`: one ISO week of production drafts as a run for the weekly quality estimate."""

from __future__ import annotations

import typer

from webapp.core.cli_support import cli_session, fail, load_settings
from webapp.core.timeutil import utcnow


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the ppi commands."""
    ppi_app = typer.Typer(help="Judge on every draft, people on a sample: production weeks.", no_args_is_help=True)
    app.add_typer(ppi_app, name="ppi")

    @ppi_app.command("production-week")
    def production_week(
        week: str = typer.Option(
            "last", "--week", help="ISO week, e.g. 2026-W47 (Monday to Sunday, the spec's time zone); last: the last complete week"
        ),
        budget: float = typer.Option(..., "--budget", help="Human-grading budget: the expected number of drafts people grade"),
        seed: int = typer.Option(None, "--seed", help="Seed of the uniform draw when the week has more drafts than the cap"),
    ) -> None:
        """Turn a week of production drafts into a run (prod-YYYY-Www); a week that has its run is reported, not duplicated."""
        from webapp.ppi import production
        from webapp.ppi.service import PpiError

        settings = load_settings()
        try:
            iso = production.resolve_week(week, today=utcnow().astimezone(settings.eval_spec.tz).date())
            with cli_session(settings) as session:
                made = production.create_week_run(
                    session=session, week=iso.label, budget=budget, cap=settings.ppi_weekly_draft_cap, seed=seed
                )
                row, run = made.week, made.run
                if made.created:
                    typer.echo(
                        f"created run {run.name}: {row.drafts_taken} drafts of {row.events_with_draft} production "
                        f"events with a draft (cap {row.cap}, seed {row.cap_seed}); human-grading budget {row.budget:g}"
                    )
                else:
                    typer.echo(f"{row.week} has its run already: {run.name} ({row.drafts_taken} drafts), nothing changed")
                typer.echo(
                    f"next: the judge pass stores scores for {run.name}, then draw the sample: "
                    f"draftdesk ppi production-sample --week {row.week}"
                )
        except PpiError as exc:
            fail(str(exc))

    @ppi_app.command("production-sample")
    def production_sample(
        week: str = typer.Option("last", "--week", help="ISO week whose run has the judge's scores, e.g. 2026-W47; last: the last complete week"),
        judge_version: str = typer.Option(
            None, "--judge-version", help="The frozen judge version whose scores the sampler reads (default: the run's only one)"
        ),
        seed: int = typer.Option(None, "--seed", help="Seed of the draws (default: a random one, stored)"),
    ) -> None:
        """Draw a production week's human-grading sample with the budget given when its run was made."""
        from webapp.ppi import production
        from webapp.ppi.service import PpiError

        settings = load_settings()
        try:
            iso = production.resolve_week(week, today=utcnow().astimezone(settings.eval_spec.tz).date())
            with cli_session(settings) as session:
                s = production.draw_week_sample(session=session, week=iso.label, judge_version=judge_version, seed=seed)
                typer.echo(f"sample drawn: {s.drawn} of {s.drafts} drafts to grade (expected {s.expected:g}, seed {s.seed})")
        except PpiError as exc:
            fail(str(exc))
