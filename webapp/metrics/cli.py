"""`draftdesk import events FILE` and `draftdesk metrics rebuild`."""

from __future__ import annotations

import csv
import datetime as dt
import itertools
import os
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from webapp.spec import EvalSpec

BATCH = 20_000
# Processes validating an events file: the machine's cores, at most 4 (the inserts need one too).
IMPORT_WORKERS = max(1, min(4, os.cpu_count() or 1))
_CSV_NULLS = {""}


class EventsFileError(ValueError):
    """A file that cannot be read as records at all (bad UTF-8, a CSV field over the limit): 'FILE:LINE: why'."""


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, raw record) from a JSONL or CSV file."""
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            try:
                for row in reader:
                    clean = {k: (None if v in _CSV_NULLS else v) for k, v in row.items() if k is not None}
                    yield reader.line_num, clean
            except (csv.Error, UnicodeDecodeError) as exc:
                reason = exc.reason if isinstance(exc, UnicodeDecodeError) else str(exc)
                raise EventsFileError(f"{path}:{reader.line_num + 1}: (line): cannot be read: {reason}") from None
        return
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise EventsFileError(f"{path}:{n}: (line): not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
            if not line.strip():
                continue
            yield n, line


def _validate_records(
    path: Path, is_csv: bool, tz: dt.tzinfo, now: dt.datetime, records: list[tuple[int, Any]]
) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """Validate one chunk of records; return (line, insert row) pairs and 'FILE:LINE: field: reason' errors."""
    from webapp.metrics.ingest import EventIn, event_row, validation_errors

    rows: list[tuple[int, dict[str, Any]]] = []
    errors: list[str] = []
    for line_no, raw in records:
        try:
            ev = EventIn.model_validate(raw) if is_csv else EventIn.model_validate_json(raw)
        except ValidationError as exc:
            for fe in validation_errors(exc):
                if fe.reason.startswith("Invalid JSON"):
                    errors.append(f"{path}:{line_no}: (line): not a JSON object: {fe.reason}")
                else:
                    errors.append(f"{path}:{line_no}: {fe.field}: {fe.reason}")
        else:
            rows.append((line_no, event_row(ev, tz, now)))
    return rows, errors


def _record_chunks(path: Path, chunk: int) -> Iterator[list[tuple[int, Any]]]:
    batch: list[tuple[int, Any]] = []
    for rec in _records(path):
        batch.append(rec)
        if len(batch) >= chunk:
            yield batch
            batch = []
    yield batch


def parse_chunks(
    path: Path, spec: EvalSpec, *, chunk: int = BATCH, workers: int = 1
) -> Iterator[tuple[list[dict[str, Any]], list[str]]]:
    """Validate the file's records in chunks, in file order; yield (insert rows, errors as 'FILE:LINE: field: reason').

    With workers > 1 the chunks are validated in forked processes (validation is pure Python and
    the GIL would otherwise serialise it with the inserts); the duplicate check across the whole
    file stays here, so results and messages are the same either way.
    """
    from functools import partial

    from webapp.timeutil import utcnow

    first_line: dict[str, int] = {}
    work = partial(_validate_records, path, path.suffix.lower() == ".csv", spec.tz, utcnow())
    pool = None
    if workers > 1:
        import multiprocessing

        pool = multiprocessing.get_context("fork").Pool(workers)
        results: Iterator[Any] = pool.imap(work, _record_chunks(path, chunk))
    else:
        results = map(work, _record_chunks(path, chunk))
    try:
        for validated, errors in results:
            rows: list[dict[str, Any]] = []
            for line_no, row in validated:
                seen = first_line.setdefault(row["event_id"], line_no)
                if seen != line_no:
                    errors.append(f"{path}:{line_no}: event_id: {row['event_id']!r} repeats line {seen}")
                else:
                    rows.append(row)
            errors.sort(key=lambda e: int(e[len(str(path)) + 1 :].split(":", 1)[0]))
            yield rows, errors
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()


def parse_file(path: Path, spec: EvalSpec, *, max_errors: int = 20) -> tuple[list[dict[str, Any]], list[str]]:
    """Validate every record of the file; return the insert rows and up to max_errors errors."""
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for chunk_rows, chunk_errors in parse_chunks(path, spec):
        rows += chunk_rows
        errors += chunk_errors
        if len(errors) >= max_errors:
            break
    return rows, errors[:max_errors]


def _count_records(path: Path) -> int:
    with path.open("rb") as fh:
        n = sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))
    return max(n - (1 if path.suffix.lower() == ".csv" else 0), 0)


def import_events(path: Path, *, quiet: bool = False, max_errors: int = 20) -> dict[str, float]:
    """Import a JSONL/CSV events file all-or-nothing; return counts and timings.

    Validation (Python) and the inserts (mostly inside SQLite or PostgreSQL, which release the
    GIL) overlap: a writer thread inserts chunk k while chunk k+1 is validated. Everything is one
    transaction: a bad record anywhere rolls back what was inserted, so nothing is written.
    """
    from webapp.cli_support import cli_session, err_console, fail, load_settings
    from webapp.metrics.ingest import bulk_insert, compute_aggregates, frame_from_rows, rebuild_days

    if not path.exists():
        fail(f"{path}: file not found")
    settings = load_settings()
    spec = settings.eval_spec
    t0 = time.perf_counter()
    all_rows: list[dict[str, Any]] = []
    errors: list[str] = []
    outcome: dict[str, Any] = {"created": 0, "error": None}
    # The progress bar goes to stderr: standard output carries only the result, printed after the commit.
    with cli_session(settings) as session, Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), disable=quiet, console=err_console
    ) as progress:
        task = progress.add_task("importing events", total=_count_records(path))
        chunks: queue.Queue[list[dict[str, Any]] | None] = queue.Queue(maxsize=2)

        def writer() -> None:
            try:
                while (chunk := chunks.get()) is not None:
                    if outcome["error"] is None and not errors:
                        outcome["created"] += bulk_insert(session, chunk)
                    progress.advance(task, len(chunk))
            except BaseException as exc:  # handed to the main thread below
                outcome["error"] = exc
                while chunks.get() is not None:
                    pass

        thread = threading.Thread(target=writer, name="import-events-writer", daemon=True)
        ended = False
        frame: Any = None
        computed: Any = None
        validated = parse_chunks(path, spec, workers=IMPORT_WORKERS)
        # The first chunk forks the validating processes; fork before the writer thread exists.
        first = next(validated)
        thread.start()
        try:
            for rows, errs in itertools.chain([first], validated):
                errors += errs
                if errors:
                    if len(errors) >= max_errors:
                        break
                    continue
                all_rows += rows
                chunks.put(rows)
            chunks.put(None)
            ended = True
            # While the writer finishes its last chunks (inside the database, without the GIL),
            # aggregate the rows in memory; rebuild_days uses them only if they are the whole days.
            frame = frame_from_rows(all_rows) if not errors else None
            computed = compute_aggregates(frame, spec) if frame is not None else None
        finally:
            if not ended:
                chunks.put(None)
            thread.join()
        if outcome["error"] is not None:
            raise outcome["error"]
        if errors:
            progress.stop()
            for e in errors[:max_errors]:
                typer.echo(e, err=True)
            more = " (first shown)" if len(errors) >= max_errors else ""
            fail(f"{path}: {len(errors[:max_errors])} bad record(s){more}; nothing imported")  # rolls back
        t_load = time.perf_counter() - t0
        created = int(outcome["created"])
        agg = progress.add_task("rebuilding daily aggregates", total=None)
        days: set[dt.date] = {r["day"] for r in all_rows}
        whole = created == len(all_rows)
        rebuild_days(
            session=session, spec=spec, days=days, frame=frame if whole else None, computed=computed if whole else None
        )
        progress.update(agg, total=1, completed=1)
    total = time.perf_counter() - t0
    stats = {
        "records": len(all_rows),
        "created": created,
        "duplicates": len(all_rows) - created,
        "load_s": t_load,
        "total_s": total,
    }
    typer.echo(
        f"{path}: {created} events imported, {len(all_rows) - created} already present; "
        f"{len(days)} days aggregated in {total:.1f} s"
    )
    return stats


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add `draftdesk import events` and `draftdesk metrics rebuild`."""

    @import_app.command("events")
    def import_events_cmd(
        file: Path = typer.Argument(..., help="JSONL (one event per line) or CSV with a header row"),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar"),
    ) -> None:
        """Import production events, all-or-nothing; events already present are skipped."""
        from webapp.cli_support import fail

        try:
            import_events(file, quiet=quiet)
        except EventsFileError as exc:
            fail(f"{exc}; nothing imported")

    metrics_app = typer.Typer(help="Online metrics.", no_args_is_help=True)
    app.add_typer(metrics_app, name="metrics")

    @metrics_app.command("rebuild")
    def rebuild_cmd() -> None:
        """Recompute every event's day and all daily aggregates (after changing the time zone, minor-edit limit or intents)."""
        from webapp.cli_support import cli_session, load_settings
        from webapp.metrics.ingest import rebuild_all

        settings = load_settings()
        with cli_session(settings) as session:
            n = rebuild_all(session=session, spec=settings.eval_spec)
        typer.echo(f"{n} aggregate rows rebuilt")
