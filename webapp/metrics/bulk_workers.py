"""Validate and format the batches of an events file in worker processes (the PostgreSQL import).

Validation (pydantic), the rows (edit distance, day) and their binary COPY formatting are pure
Python work that one interpreter can only do on one core, while PostgreSQL's inserting needs
little. So for PostgreSQL the import hands raw batches to `workers` processes (default: the
number of cores) and the process holding the transaction only checks ids across the file and
sends each batch's bytes: measured on 1,000,000 events on this 2-core machine, see
docs/benchmarks.md. Results come back in file order, so errors are still reported by line, and
at most 2 batches per worker are in flight, so memory stays bounded whatever the file's size.

The workers are forked when the pool is made, which the import does before it opens its own
connection or starts a thread (so a child holds no copy of either): they inherit the loaded
modules instead of importing them again (a fork server or spawn costs each worker about 0.9 s
of CPU on this machine). Each one opens a connection of its own only to lend psycopg its type
adapters: it sends nothing on it.
"""

from __future__ import annotations

import datetime as dt
import gc
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

import pandas as pd
from sqlalchemy.engine import make_url

from webapp.metrics.aggregates import compute_aggregates
from webapp.metrics.bulkload import IMPORT_GC_THRESHOLDS, Chunk, Validator
from webapp.metrics.ingest import encode_event_rows
from webapp.spec import EvalSpec

_worker: dict[str, Any] = {}


def _start(path: Path, tz: dt.tzinfo, received_at: dt.datetime, conninfo: str) -> None:
    import psycopg

    gc.set_threshold(*IMPORT_GC_THRESHOLDS)  # for the worker's whole life: it only validates batches
    _worker["validator"] = Validator(path, tz=tz, received_at=received_at)
    _worker["conn"] = psycopg.connect(conninfo, autocommit=True)


def _ready() -> None:
    """The first task: makes the pool fork its workers."""


def _work(records: list[tuple[int, Any]], keep_rows: bool) -> Chunk:
    chunk: Chunk = _worker["validator"].chunk(records, keep_rows=keep_rows)
    if chunk.rows:
        chunk.copy_data = encode_event_rows(_worker["conn"], chunk.rows)
        chunk.rows = []  # only the bytes travel back
    if chunk.frame is not None:
        chunk.frame = _packed(chunk.frame)
    return chunk


def _aggregate(frame: pd.DataFrame, spec: EvalSpec) -> list[tuple[Any, ...]]:
    return compute_aggregates(_unpacked(frame), spec)


def _packed(frame: pd.DataFrame) -> pd.DataFrame:
    """Labels and days as categories: pickled as small codes and a few values, not one object per row."""
    return frame.assign(**{c: frame[c].astype("category") for c in frame.columns if frame[c].dtype == object})


def _unpacked(frame: pd.DataFrame) -> pd.DataFrame:
    """The plain columns the aggregation expects, back from _packed."""
    return frame.assign(
        **{c: frame[c].astype(object) for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)}
    )


def _received(chunk: Chunk) -> Chunk:
    if chunk.frame is not None:
        chunk.frame = _unpacked(chunk.frame)
    return chunk


def libpq_conninfo(database_url: str) -> str:
    """Return a SQLAlchemy PostgreSQL URL as a libpq connection string (the driver name dropped)."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


class ChunkPool:
    """Worker processes that turn raw batches into Chunks with binary COPY data, in order."""

    def __init__(
        self, path: Path, *, tz: dt.tzinfo, received_at: dt.datetime, database_url: str, workers: int | None = None
    ) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.executor = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_start,
            initargs=(path, tz, received_at, libpq_conninfo(database_url)),
        )
        # the workers are forked by the first task: now, while the caller has no connection or thread
        self.executor.submit(_ready).result()

    def __enter__(self) -> ChunkPool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)

    def chunks(self, batches: Iterable[list[tuple[int, Any]]], *, keep_rows: Callable[[], bool]) -> Iterator[Chunk]:
        """Yield the Chunk of each batch in order; `keep_rows()` is asked as each batch is handed out."""
        window: deque[Future[Chunk]] = deque()
        for batch in batches:
            window.append(self.executor.submit(_work, batch, keep_rows()))
            if len(window) >= 2 * self.workers:
                yield _received(window.popleft().result())
        while window:
            yield _received(window.popleft().result())

    def aggregate(self, frames: list[pd.DataFrame], spec: EvalSpec) -> list[tuple[Any, ...]]:
        """Return compute_aggregates of each frame (whole days each), computed side by side, in order."""
        futures = [self.executor.submit(_aggregate, _packed(frame), spec) for frame in frames]
        return [row for future in futures for row in future.result()]
