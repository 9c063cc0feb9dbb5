"""Statements written into libpq's pipeline directly, sent with one flush: what `sql_batch` sends.

Why not psycopg's `Connection.pipeline()` with a cursor per statement (what `sql_batch` used
first): each `cursor.execute` in a pipeline flushes what is queued so far to the socket, so a
batch of 8 statements made 8 loopback sends and woke the server process up to 8 times, and the
cursor's own work (a cursor object, its transformer, its result bookkeeping) came on top. Under
50 graders, psycopg held 41% of the workers' samples that held the GIL (py-spy `--gil`), 28
points of it in that per-statement send.
`benchmarks/bench_pg_pipeline.py` (8 three-row reads and a COMMIT, 24 November 2026): 351 µs of
client CPU and 273 µs of server CPU per batch through cursors, 114 µs and 197 µs here.

What this does, per batch:
- A transaction is opened in the same pipeline when the connection has none (psycopg would
  send the `BEGIN` the same way, as its first queued command), so the first batch of a request
  costs no extra round trip.
- Statements are converted by psycopg's own `PostgresQuery` with the connection's adapters
  (SQLAlchemy registers its own on the connection), so the parameters the server gets are the
  ones `cursor.execute` would send, and rows are loaded by psycopg's `Transformer` exactly as
  `cursor.fetchall()` loads them (text format, the connection's loaders).
- Statements are prepared on the server through psycopg's own prepared-statement cache (the
  connection's `PrepareManager`, what `cursor.execute` uses): after 5 executions on a connection
  (`prepare_threshold`; None prepares nothing), at most `prepared_max` per connection, run by name
  from then on. Without it the server plans every statement each time: measured at 50 graders,
  245 requests/s against 340. One cache, psycopg's, because psycopg answers a ROLLBACK, a first
  `ROLLBACK TO SAVEPOINT` or DDL with DEALLOCATE ALL once it holds prepared statements: a cache
  of our own (the first version of this module) lost its statements to that and had to mirror
  psycopg's rules from outside. A name is kept only when its prepare and its statement ran (after
  a failure in the same pipeline the server skips both); the cursor's rules apply otherwise.
- Everything is flushed once, then the results are read up to the pipeline's sync. The first
  error is raised as psycopg raises it (`psycopg.errors.*`); the statements after it were not run.

This uses psycopg internals (`PostgresQuery`, the connection's `_prepared` cache and
`_get_tx_start_command`, the `generators` it waits on); psycopg is pinned in `constraints.txt`, and
`tests/test_sql_batch.py` compares every kind of result with SQLAlchemy's own on PostgreSQL;
`tests/test_pg_pipeline.py` checks the transaction, prepared statements (with rollbacks), errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString, cast

import psycopg
from psycopg import abc, errors, pq
from psycopg._preparing import Prepare
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer
from psycopg.generators import fetch_many, send

_IDLE = pq.TransactionStatus.IDLE
_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_FATAL_ERROR = pq.ExecStatus.FATAL_ERROR
_PIPELINE_SYNC = pq.ExecStatus.PIPELINE_SYNC


@dataclass(slots=True)
class Rows:
    """One statement's answer: the column type OIDs and the rows (empty lists for a plain write)."""

    type_codes: list[int]
    rows: list[tuple[Any, ...]]


@dataclass(slots=True)
class _Sent:
    """What one queued command was, to read its result: a transaction start, a prepare or a statement,
    with what psycopg's cache `validate` needs for a prepare and for a statement it has just taken in."""

    kind: str  # "begin" | "prepare" | "statement"
    cache_entry: tuple[Any, Prepare, bytes] | None = None


def run(raw: psycopg.Connection[Any], statements: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Rows]:
    """Run `statements` (pyformat SQL and parameters) in order in one round trip; return their rows."""
    pgconn = raw.pgconn
    cache = raw._prepared  # psycopg's own prepared-statement cache (see the module docstring)
    transformer = Transformer(raw)
    sent: list[_Sent] = []
    pgconn.enter_pipeline_mode()
    try:
        if not raw.autocommit and pgconn.transaction_status == _IDLE:
            pgconn.send_query_params(raw._get_tx_start_command(), None)
            sent.append(_Sent("begin"))
        for sql, params in statements:
            query = PostgresQuery(transformer)
            query.convert(cast(LiteralString, sql), params)  # (SQL compiled by SQLAlchemy, never user text)
            prep, name = cache.get(query)
            if prep is Prepare.SHOULD:
                pgconn.send_prepare(name, query.query, param_types=query.types)
                sent.append(_Sent("prepare", (cache.key(query), prep, name)))
            if prep is Prepare.NO:
                pgconn.send_query_params(
                    query.query, query.params, param_types=query.types, param_formats=query.formats
                )
            else:
                pgconn.send_query_prepared(name, query.params, param_formats=query.formats)
            key = cache.maybe_add_to_cache(query, prep, name)
            sent.append(_Sent("statement", None if key is None else (key, prep, name)))
        pgconn.pipeline_sync()
        raw.wait(send(pgconn))
        results: list[pq.abc.PGresult] = []
        while True:
            fetched = raw.wait(fetch_many(pgconn))
            if not fetched or fetched[-1].status == _PIPELINE_SYNC:
                break  # (nothing at all: an answer is missing, which _read reports)
            results.append(fetched[-1])
    finally:
        _leave_pipeline(raw)
    answers = _read(raw, sent, results, transformer)
    if cache._to_flush:  # statements psycopg's cache let go of (past its size), dropped as the cursor does
        raw.wait(cache.maintain_gen(raw))
    return answers


def _leave_pipeline(raw: psycopg.Connection[Any]) -> None:
    pgconn = raw.pgconn
    if pgconn.pipeline_status == pq.PipelineStatus.OFF:
        return
    try:
        pgconn.exit_pipeline_mode()
    except psycopg.Error:
        # Results left unread (an interrupted wait): the connection's state is unknown, so it is
        # closed; SQLAlchemy then replaces it when it is next checked out.
        raw.close()


def _read(
    raw: psycopg.Connection[Any],
    sent: list[_Sent],
    results: list[pq.abc.PGresult],
    transformer: abc.Transformer,
) -> list[Rows]:
    if len(results) != len(sent):
        raise psycopg.OperationalError(f"pipeline returned {len(results)} results for {len(sent)} commands")
    answers: list[Rows] = []
    failure: pq.abc.PGresult | None = None
    for what, result in zip(sent, results, strict=True):
        status = result.status
        if status == _FATAL_ERROR and failure is None:
            failure = result
        if what.cache_entry is not None and (what.kind == "statement" or status != _COMMAND_OK):
            # psycopg's cache keeps a statement only if it ran, and a name only if its prepare did
            # (after a failure in the same pipeline the server skips both)
            raw._prepared.validate(*what.cache_entry, [result])
        if what.kind == "statement" and failure is None:
            if status == _TUPLES_OK:
                transformer.set_pgresult(result)
                type_codes = [result.ftype(i) for i in range(result.nfields)]
                answers.append(Rows(type_codes, transformer.load_rows(0, result.ntuples, tuple)))
            else:
                answers.append(Rows([], []))
    if failure is not None:
        raise errors.error_from_result(failure, encoding=raw.info.encoding)
    return answers
