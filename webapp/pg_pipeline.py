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
- A statement a connection has seen before is prepared on the server once (its own `_ddN` name,
  never one of psycopg's `_pg3_N`) and executed by name from then on, as psycopg does after 5
  executions: the server then parses it once per connection. At most `MAX_PREPARED` per
  connection; a name is kept only when its prepare succeeded (a prepare after a failed
  statement in the same pipeline is skipped by the server). A connection whose
  `prepare_threshold` is None (psycopg's setting for a pooler that cannot keep prepared
  statements, such as PgBouncer in transaction mode before 1.21) gets none from here either.
- Everything is flushed once, then the results are read up to the pipeline's sync. The first
  error is raised as psycopg raises it (`psycopg.errors.*`); the statements after it were not run.
- Before a real ROLLBACK psycopg drops its own prepared statements with DEALLOCATE ALL (which
  takes ours along); `forget` is called then (`sql_batch` hooks the rollback), and the next batch
  closes our names first (closing a name the server no longer has is no error). A DROP or ALTER
  run outside a batch is not watched for: the app runs DDL only in migrations, on their own
  connections; a name the server lost anyway fails one batch (26000), and they are all prepared again.

This uses three psycopg internals (`PostgresQuery`, `Connection._get_tx_start_command`, the
`generators` it waits on); psycopg is pinned in `constraints.txt`, and
`tests/test_sql_batch.py` compares every kind of result with SQLAlchemy's own on PostgreSQL;
`tests/test_pg_pipeline.py` checks the transaction, the prepared names, errors and the cap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, LiteralString, cast
from weakref import WeakKeyDictionary

import psycopg
from psycopg import abc, errors, pq
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer
from psycopg.generators import fetch_many, send

MAX_PREPARED = 256  # server-side statements per connection (each holds a parse tree there)
_MAX_SEEN = 4096  # statements counted per connection before the count starts again

_IDLE = pq.TransactionStatus.IDLE
_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_FATAL_ERROR = pq.ExecStatus.FATAL_ERROR
_PIPELINE_SYNC = pq.ExecStatus.PIPELINE_SYNC
_UNDEFINED_STATEMENT = "26000"  # a name the server no longer knows (say, after DISCARD ALL)

Key = tuple[bytes, tuple[int, ...]]


@dataclass(slots=True)
class Rows:
    """One statement's answer: the column type OIDs and the rows (empty lists for a plain write)."""

    type_codes: list[int]
    rows: list[tuple[Any, ...]]


@dataclass(slots=True)
class _Prepared:
    """A connection's server-side statements: name by (SQL, parameter types), and how often each was seen."""

    names: dict[Key, bytes] = field(default_factory=dict)
    seen: dict[Key, int] = field(default_factory=dict)
    issued: int = 0  # names handed out, kept or not: a name is never handed out twice
    closing: list[bytes] = field(default_factory=list)  # forgotten names the server may still hold

    def name_for(self, key: Key, preparing: dict[Key, bytes]) -> tuple[bytes | None, bool]:
        """The statement's name, if it has or gets one, and whether this batch must prepare it."""
        name = self.names.get(key) or preparing.get(key)
        if name is not None:
            return name, False
        if len(self.seen) >= _MAX_SEEN:
            self.seen.clear()
        count = self.seen[key] = self.seen.get(key, 0) + 1
        if count < 2 or len(self.names) + len(preparing) >= MAX_PREPARED:
            return None, False
        self.issued += 1
        name = preparing[key] = f"_dd{self.issued}".encode()
        return name, True


_prepared: WeakKeyDictionary[psycopg.Connection[Any], _Prepared] = WeakKeyDictionary()


def forget(raw: psycopg.Connection[Any]) -> None:
    """Stop using the connection's prepared statements; the next batch closes them on the server first.

    Called before a real ROLLBACK (`sql_batch` hooks it): psycopg then drops its own prepared
    statements with DEALLOCATE ALL, which takes ours along when it has any, and it does so because
    a rolled-back DROP or ALTER can leave a statement's plan pointing at objects that are gone.
    Closing a name the server no longer has is not an error, so either way the names are closed.
    """
    prepared = _prepared.get(raw)
    if prepared is not None and prepared.names:
        prepared.closing.extend(prepared.names.values())
        prepared.names.clear()
        prepared.seen.clear()


@dataclass(slots=True)
class _Sent:
    """What one queued command was, to read its result: a transaction start, a prepare, or a statement."""

    kind: str  # "close" | "begin" | "prepare" | "statement"
    key: Key | None = None
    name: bytes | None = None


def run(raw: psycopg.Connection[Any], statements: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Rows]:
    """Run `statements` (pyformat SQL and parameters) in order in one round trip; return their rows."""
    pgconn = raw.pgconn
    prepared = _prepared.get(raw)
    if prepared is None:
        prepared = _prepared[raw] = _Prepared()
    transformer = Transformer(raw)
    sent: list[_Sent] = []
    preparing: dict[Key, bytes] = {}
    may_prepare = raw.prepare_threshold is not None  # None: psycopg told to prepare nothing (PgBouncer)
    closing, prepared.closing = prepared.closing, []
    pgconn.enter_pipeline_mode()
    try:
        for name in closing:
            pgconn.send_close_prepared(name)
            sent.append(_Sent("close", name=name))
        if not raw.autocommit and pgconn.transaction_status == _IDLE:
            pgconn.send_query_params(raw._get_tx_start_command(), None)
            sent.append(_Sent("begin"))
        for sql, params in statements:
            query = PostgresQuery(transformer)
            query.convert(cast(LiteralString, sql), params)  # (SQL compiled by SQLAlchemy, never user text)
            key: Key = (query.query, tuple(query.types))
            name, prepare = prepared.name_for(key, preparing) if may_prepare else (None, False)
            if prepare:
                assert name is not None
                pgconn.send_prepare(name, query.query, param_types=query.types)
                sent.append(_Sent("prepare", key, name))
            if name is None:
                pgconn.send_query_params(
                    query.query, query.params, param_types=query.types, param_formats=query.formats
                )
            else:
                pgconn.send_query_prepared(name, query.params, param_formats=query.formats)
            sent.append(_Sent("statement"))
        pgconn.pipeline_sync()
        raw.wait(send(pgconn))
        results: list[pq.abc.PGresult] = []
        while True:
            fetched = raw.wait(fetch_many(pgconn))
            if not fetched or fetched[-1].status == _PIPELINE_SYNC:
                break  # (nothing at all: an answer is missing, which _read reports)
            results.append(fetched[-1])
    except BaseException:
        prepared.closing.extend(closing)  # (whether they ran is unknown: closing twice is harmless)
        raise
    finally:
        _leave_pipeline(raw)
    return _read(raw, prepared, sent, results, transformer)


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
    prepared: _Prepared,
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
        if what.kind == "close":
            if status != _COMMAND_OK and what.name is not None:
                prepared.closing.append(what.name)  # not run (an earlier failure): close it next time
        elif what.kind == "prepare":
            if status == _COMMAND_OK and what.key is not None and what.name is not None:
                prepared.names[what.key] = what.name
        elif what.kind == "statement" and failure is None:
            if status == _TUPLES_OK:
                transformer.set_pgresult(result)
                type_codes = [result.ftype(i) for i in range(result.nfields)]
                answers.append(Rows(type_codes, transformer.load_rows(0, result.ntuples, tuple)))
            else:
                answers.append(Rows([], []))
    if failure is not None:
        error = errors.error_from_result(failure, encoding=raw.info.encoding)
        if error.sqlstate == _UNDEFINED_STATEMENT:
            forget(raw)  # the server forgot some of our names: prepare them all again
        raise error
    return answers
