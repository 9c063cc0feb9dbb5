"""`draftdesk serve`, `draftdesk jobs` and `draftdesk demo`: run the web app (for a team, or with the demo data) and its jobs.

They live here, not in a domain's cli.py, because serving is no domain's business; webapp/app/cli.py
maps both names to this module (CLI_MODULES). How the server runs is in webapp/web/serving.py.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from webapp.core.config import Settings
    from webapp.core.spec import EvalSpec


def demo_database_url() -> str:
    """Return the demo database: DRAFTDESK_DATABASE_URL when set, else data/demo.db."""
    from webapp.core.config import DATA_DIR  # loaded by `demo`, not by `--help`

    return os.environ.get("DRAFTDESK_DATABASE_URL", "").strip() or f"sqlite:///{DATA_DIR / 'demo.db'}"


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the serve, jobs and demo commands."""
    app.command("serve")(serve)
    app.command("jobs")(jobs)
    app.command("demo")(demo)


def serve(
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
    workers: int = typer.Option(1, "--workers", min=1, help="uvicorn worker processes (one is enough for a team)"),
    access_log: bool = typer.Option(True, "--access-log/--no-access-log", help="Log every request (JSON lines on stderr)"),
    background: bool = typer.Option(
        True, "--background/--no-background", help="Run the background jobs (metrics rebuild, alerts, retention) in this process"
    ),
    separate_jobs: bool = typer.Option(
        False, "--separate-jobs", help="Run no background job: a `draftdesk jobs` process beside this one runs them"
    ),
) -> None:
    """Back up and apply pending migrations, then serve the dashboard with uvicorn, its background jobs inside (the default topology)."""
    from webapp.app.main import create_app
    from webapp.app.warmup import warm
    from webapp.core.cli_support import fail
    from webapp.core.config import ConfigError, Settings
    from webapp.core.migrations_runner import upgrade
    from webapp.core.spec import SpecError
    from webapp.ops.logs import logging_config
    from webapp.web import serving

    try:
        settings = Settings(background_jobs=background and not separate_jobs, separate_jobs=separate_jobs)
        app_ = create_app(settings)
    except (ConfigError, SpecError) as exc:
        fail(str(exc))
    _back_up_before_migrating(settings)
    upgrade(settings.database_url)
    if workers == 1:
        warm(app_)  # before the first request, not during it (each of N workers warms its own app)
    else:
        app_.state.engine.dispose()
        # uvicorn's workers build their app from the environment: pass the background choice on
        # (the database lease lets one of them evaluate alerts at a time).
        os.environ["DRAFTDESK_BACKGROUND_JOBS"] = "true" if settings.background_jobs else "false"
        os.environ["DRAFTDESK_SEPARATE_JOBS"] = "true" if separate_jobs else "false"
    serving.run(
        app_,
        host=host,
        port=port,
        workers=workers,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        log_config=logging_config(access_log=access_log),
    )


def _back_up_before_migrating(settings: Settings) -> None:
    """Warn about a backup directory beside the database, and back up when migrations are pending (serve's first step)."""
    from webapp.core.cli_support import fail
    from webapp.ops.backup import BackupError, backup_before_migrating, check_backup_dir
    from webapp.ops.backup_files import remove_stale_temporaries
    from webapp.ops.logs import JsonFormatter

    # a backup killed midway (db backup, or this step of an earlier serve) left its temporary file
    for stale in remove_stale_temporaries(settings.backup_dir):
        typer.echo(f"removed the temporary file of an interrupted backup: {stale}", err=True)
    try:
        placement = check_backup_dir(
            database_url=settings.database_url, backup_dir=settings.backup_dir, mode=settings.mode, strict=False
        )
        if placement:
            # A JSON log line like every other line serve writes on stderr (log collectors parse them).
            record = logging.makeLogRecord(
                {"name": "webapp.ops.backup", "levelname": "WARNING", "levelno": logging.WARNING, "msg": placement}
            )
            typer.echo(JsonFormatter().format(record), err=True)
        taken = backup_before_migrating(settings.database_url, settings.backup_dir)
    except BackupError as exc:
        fail(f"{exc}; no migration was applied (serve backs up first)", code=1)
    if taken is not None:
        typer.echo(f"backup before applying migrations: {taken}")


def jobs(
    access_log: bool = typer.Option(True, "--log/--no-log", help="Log the jobs' passes (JSON lines on stderr)"),
) -> None:
    """Run the background jobs (metrics rebuild, alerts, retention) as their own process, beside `serve --separate-jobs`."""
    import asyncio
    import logging.config

    from webapp.app.jobs import run_jobs
    from webapp.app.main import create_app
    from webapp.core.cli_support import fail
    from webapp.core.config import ConfigError, Settings
    from webapp.core.spec import SpecError
    from webapp.ops.backup import pending_migrations, table_names
    from webapp.ops.logs import logging_config

    try:
        settings = Settings(background_jobs=True)
        app_ = create_app(settings)
    except (ConfigError, SpecError) as exc:
        fail(str(exc))
    if not table_names(settings.database_url) or pending_migrations(settings.database_url):
        # serve backs up and migrates; two processes migrating at once would race
        fail("the database is not migrated (no tables, or migrations pending): start `draftdesk serve` first (it backs up, then applies them)")
    logging.config.dictConfig(logging_config(access_log=access_log))
    asyncio.run(run_jobs(app_))


def demo(
    port: int = typer.Option(8000, "--port", help="Port to serve on (127.0.0.1)"),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to serve on"),
    seed_only: bool = typer.Option(False, "--seed-only", help="Only create and seed the database, do not serve"),
    seed: int = typer.Option(7, "--seed", help="Seed of the demo content (same seed, same demo)"),
    export_dataset: Path = typer.Option(None, "--export-dataset", help="Write the demo dataset JSONL here and exit"),
    export_kb: Path = typer.Option(None, "--export-kb", help="Write the demo KB (import format, JSONL) here and exit"),
    export_drafts: Path = typer.Option(None, "--export-drafts", help="Write the demo run's drafts JSONL here and exit"),
) -> None:
    """Create (if absent) and seed the demo database, print one user per role, and serve it."""
    if export_dataset or export_kb or export_drafts:
        _export_demo(seed, dataset=export_dataset, kb=export_kb, drafts=export_drafts)
        return
    from webapp.core.config import ConfigError, Settings
    from webapp.core.spec import SpecError

    url = demo_database_url()
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    try:
        # the server runs the alert worker, which delivers the demo's notifications to its log file
        settings = Settings(database_url=url, mode="demo", base_url=f"http://{host}:{port}", background_jobs=True)
        spec = settings.eval_spec
    except (ConfigError, SpecError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _seed_demo(settings, spec, seed=seed)
    if seed_only:
        return
    import uvicorn

    from webapp.app.main import create_app

    typer.echo(f"serving the demo on http://{host}:{port}  (Ctrl+C to stop)")
    uvicorn.run(create_app(settings), host=host, port=port, log_level="warning")


def _export_demo(seed: int, *, dataset: Path | None, kb: Path | None, drafts: Path | None) -> None:
    """Write the demo's dataset, KB and drafts (those asked for) as JSONL files."""
    from webapp.demo import content as c

    built = c.build_content(seed)
    for path, data in ((dataset, built.dataset_jsonl), (kb, built.kb_jsonl), (drafts, built.drafts_jsonl)):
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            typer.echo(f"wrote {path}")


def _seed_demo(settings: Settings, spec: EvalSpec, *, seed: int) -> None:
    """Migrate and seed the demo database, deliver its notifications, and print who can sign in."""
    from webapp.alerts import delivery as alerts_delivery
    from webapp.alerts import demo as alerts_demo
    from webapp.core.db import make_engine, session_scope
    from webapp.core.migrations_runner import upgrade
    from webapp.demo import content as c
    from webapp.demo.seed import DemoHookError, is_seeded, seed_demo

    url = settings.database_url
    upgrade(url)
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            already = is_seeded(session=session)
            seed_demo(session=session, spec=spec, seed=seed)
        alerts_delivery.deliver_due(engine=engine, base_url=settings.base_url, secret_key=settings.secret_key)
        with session_scope(engine) as session:
            channels = alerts_demo.where_notifications_go(session=session)
    except DemoHookError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:
        engine.dispose()
    where = url.split("@")[-1]
    typer.echo(f"demo database {'already seeded' if already else 'seeded'}: {where}")
    typer.echo(f"sign in with any of these (password for all: {c.DEMO_PASSWORD}):")
    for key, email, name, roles in c.DEMO_USERS:
        typer.echo(f"  {key:<13} {email:<32} {c.DEMO_PASSWORD}   ({name}; role {', '.join(roles)})")
    typer.echo("alert notifications go to:")
    for line in channels:
        typer.echo(line)
    # issue 41: a webhook to a receiver on this machine was refused with no word in the demo
    private = "allowed" if settings.alerts_allow_private_targets else "refused"
    typer.echo(
        f"  a webhook or Slack channel to this machine or its network (127.0.0.1, 10.x, 192.168.x) is {private}:"
        " start the demo with DRAFTDESK_ALERTS_ALLOW_PRIVATE_TARGETS=1 to try a local receiver"
    )
