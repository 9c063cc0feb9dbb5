"""`draftdesk import events FILE` and `draftdesk metrics rebuild`."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from webapp.core.cli_support import fail

if TYPE_CHECKING:  # pandas, the database and the loader load when a command runs (`draftdesk --help` stays quick)
    import pandas as pd
    from sqlmodel import Session

    from webapp.core.spec import EvalSpec
    from webapp.metrics.bulkload import FirstLines, Loader, Validator


def _count_records(path: Path) -> int:
    with path.open("rb") as fh:
        n = sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))
    return max(n - (1 if path.suffix.lower() == ".csv" else 0), 0)


@dataclass
class _FileRead:
    """What the validate-and-load loop over a file gave: the clean batches' frames, or the errors."""

    frames: list[pd.DataFrame] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    file_error: str = ""
    records: int = 0


def _read_and_load(path: Path, loader: Loader, validator: Validator, ids: FirstLines, progress: Progress, max_errors: int) -> _FileRead:
    """Validate the file batch by batch and send the clean batches to the loader, until the first
    max_errors bad records (after one, the rest are only validated: nothing will be kept)."""
    from webapp.metrics.bulkload import EventsFileError, read_records

    out = _FileRead()
    task = progress.add_task("importing events", total=_count_records(path))
    try:
        for batch in read_records(path):
            chunk = validator.chunk(batch, keep_rows=not out.errors)
            out.records += chunk.records
            ids.check(chunk)
            progress.advance(task, chunk.records)
            if chunk.errors or out.errors:
                out.errors += chunk.errors
                if len(out.errors) >= max_errors:
                    break
                continue
            if chunk.frame is not None:
                out.frames.append(chunk.frame)
            loader.write(chunk)
    except EventsFileError as exc:
        out.file_error = str(exc)
    return out


def _refuse(path: Path, read: _FileRead, progress: Progress, max_errors: int) -> None:
    """Stop the import (nothing is kept: the transaction rolls back) when the file had an error."""
    if read.file_error:
        progress.stop()
        fail(f"{read.file_error}; nothing imported")
    if read.errors:
        progress.stop()
        for e in read.errors[:max_errors]:
            typer.echo(e, err=True)
        more = " (first shown)" if len(read.errors) >= max_errors else ""
        fail(f"{path}: {len(read.errors[:max_errors])} bad record(s){more}; nothing imported")


def _aggregate(session: Session, spec: EvalSpec, frames: list[pd.DataFrame], created: int) -> tuple[int, set[dt.date]]:
    """Rebuild the imported days' aggregates; return how many events the file held and their days.

    A fresh import (nothing was there before) is aggregated from the rows in memory; rebuild_days
    checks the stored count and reads the days back otherwise.
    """
    import pandas as pd

    from webapp.metrics.aggregates import compute_aggregates, rebuild_days

    frame = pd.concat(frames, ignore_index=True) if frames else None
    frames.clear()
    n_rows = 0 if frame is None else len(frame)
    days: set[dt.date] = set() if frame is None else set(frame["day"].unique())
    whole = frame is not None and created == n_rows
    computed = None
    if whole and frame is not None:
        # a month of days per call: the aggregation's intermediate frames stay small (the months
        # themselves are slices of the frame, about its size again: 649-696 MiB peak for 1M events)
        ordered = sorted(days)
        months = [frame.loc[frame["day"].isin(ordered[i : i + 30])] for i in range(0, len(ordered), 30)]
        computed = [row for month in months for row in compute_aggregates(month, spec)]
    rebuild_days(session=session, spec=spec, days=days, frame=frame if whole else None, computed=computed)
    return n_rows, days


def import_events(path: Path, *, quiet: bool = False, max_errors: int = 20) -> dict[str, float]:
    """Import a JSONL/CSV events file all-or-nothing; return counts and timings.

    One process, one thread, one transaction: each batch is validated, then sent (a prepared
    executemany on SQLite, COPY on PostgreSQL); a bad record anywhere rolls back what was
    inserted, so nothing is written. Sized for 1k-50k events a day (issue 26): an earlier version
    validated in forked worker processes and inserted from a second thread; the plain loop is
    simpler and meets the import target (docs/metrics.md).
    """
    from webapp.core.cli_support import cli_session, load_settings
    from webapp.core.timeutil import utcnow
    from webapp.metrics.bulkload import FirstLines, Loader, Validator, rare_collections
    from webapp.metrics.watermark import pruned_before

    if not path.exists():
        fail(f"{path}: file not found")
    settings = load_settings()
    spec = settings.eval_spec
    t0 = time.perf_counter()
    received = utcnow()
    with rare_collections(), contextlib.ExitStack() as stack:
        session = stack.enter_context(cli_session(settings))
        progress = stack.enter_context(
            Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), disable=quiet
            )
        )
        loader = Loader(session)
        ids = FirstLines(path)
        validator = Validator(path, tz=spec.tz, received_at=received, pruned_before=pruned_before(session))
        read = _read_and_load(path, loader, validator, ids, progress, max_errors)
        _refuse(path, read, progress, max_errors)  # rolls back
        created = loader.finish()
        ids.first.clear()  # the ids are checked; free them before aggregating
        t_load = time.perf_counter() - t0
        agg = progress.add_task("rebuilding daily aggregates", total=None)
        n_rows, days = _aggregate(session, spec, read.frames, created)
        progress.update(agg, total=1, completed=1)
    total = time.perf_counter() - t0
    typer.echo(
        f"{path}: {created} events imported, {n_rows - created} already present; "
        f"{len(days)} days aggregated in {total:.1f} s (validated and loaded in {t_load:.1f} s)"
    )
    return {"records": n_rows, "created": created, "duplicates": n_rows - created, "load_s": t_load, "total_s": total}


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add `draftdesk import events` and `draftdesk metrics rebuild`."""

    @import_app.command("events")
    def import_events_cmd(
        file: Path = typer.Argument(..., help="JSONL (one event per line) or CSV with a header row"),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar"),
    ) -> None:
        """Import production events, all-or-nothing; events already present are skipped."""
        import_events(file, quiet=quiet)

    metrics_app = typer.Typer(help="Online metrics.", no_args_is_help=True)
    app.add_typer(metrics_app, name="metrics")

    @metrics_app.command("rebuild")
    def rebuild_cmd(
        restart: bool = typer.Option(False, "--restart", help="Start over instead of continuing an unfinished rebuild"),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar"),
    ) -> None:
        """Recompute every event's day and all daily aggregates (after changing the time zone, minor-edit limit or intents).

        A day per short transaction: the app keeps serving (and saving grades) meanwhile, and a rebuild
        that is stopped continues with the next day when run again.
        """
        rebuild_by_day_cli(restart=restart, quiet=quiet)


def rebuild_by_day_cli(*, restart: bool, quiet: bool) -> None:
    """Run the day-by-day rebuild with a progress bar per phase, then say what it did."""
    from rich.progress import TimeRemainingColumn

    from webapp.core.cli_support import load_settings
    from webapp.core.db import make_engine, session_scope
    from webapp.metrics.rebuild import rebuild_by_day
    from webapp.metrics.watermark import pruned_before

    settings = load_settings()
    # a chore beside the server on the same machine: the server's requests (a grade being saved) go first
    if hasattr(os, "nice"):
        os.nice(10)
    engine = make_engine(settings.database_url)
    labels = {"days": "giving each event its day", "figures": "rebuilding each day's figures"}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    try:
        with Progress(*columns, disable=quiet) as progress:
            tasks: dict[str, TaskID] = {}

            def on_day(phase: str, done: int, total: int) -> None:
                if phase not in tasks:
                    tasks[phase] = progress.add_task(labels[phase], total=total)
                progress.update(tasks[phase], completed=done, total=total)

            report = rebuild_by_day(engine=engine, spec=settings.eval_spec, restart=restart, on_day=on_day)
        with session_scope(engine, write=False) as session:
            mark = pruned_before(session)
    finally:
        engine.dispose()
    resumed = f" (continued an unfinished rebuild after {report.resumed})" if report.resumed else ""
    kept = f"; days before the retention watermark {mark} kept as they were (their events were pruned)" if mark else ""
    typer.echo(f"{report.rows} aggregate rows rebuilt over {report.days} days, {report.relabelled_events} events given a new day{resumed}{kept}")
    typer.echo(report.hold_summary())
