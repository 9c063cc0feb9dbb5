"""The grading page reads only, and save-and-next writes in one short section committed before the next item renders."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from tests.conftest import csrf_for
from tests.grading.conftest import FORM, HX, GradingWorld, post_form

WRITES = ("INSERT", "UPDATE", "DELETE")


def _reads(statement: str) -> bool:
    """A SELECT, or a WITH whose parts all read."""
    return statement.startswith("SELECT") or (
        statement.startswith("WITH") and not any(f" {w} " in f" {statement} " for w in WRITES)
    )


@contextmanager
def statements(app: Any) -> Iterator[list[str]]:
    """Record the SQL the app sends (statement text, and COMMIT) while the block runs."""
    seen: list[str] = []
    engine = app.state.engine

    def statement(_conn: Any, _cursor: Any, sql: str, *_args: Any) -> None:
        seen.append(" ".join(sql.split()))

    def commit(_conn: Any) -> None:
        seen.append("COMMIT")

    event.listen(engine, "before_cursor_execute", statement)
    event.listen(engine, "commit", commit)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", statement)
        event.remove(engine, "commit", commit)


@pytest.fixture
def opened(world: GradingWorld, client_as: Callable[..., TestClient]) -> tuple[TestClient, int]:
    """Alice's client on the first draft of her queue (the page reserves the next one); its id."""
    c = client_as("labeler", email="alice@example.test")
    r = post_form(c, f"/grading/runs/{world.run.id}/next", {})
    assert r.status_code == 303
    draft_id = int(r.headers["location"].split("/")[-1].split("?")[0])
    assert c.get(f"/grading/drafts/{draft_id}").status_code == 200  # reserves the next one
    return c, draft_id


def test_rereading_a_grading_page_writes_nothing(app: Any, opened: tuple[TestClient, int]) -> None:
    c, draft_id = opened
    with statements(app) as seen:
        r = c.get(f"/grading/drafts/{draft_id}")
    assert r.status_code == 200 and 'id="grading-upcoming"' in r.text
    assert [s for s in seen if s.startswith(WRITES)] == []


def test_save_and_next_commits_its_writes_before_reading_the_next_item(
    app: Any, opened: tuple[TestClient, int]
) -> None:
    c, draft_id = opened
    with statements(app) as seen:
        headers = {**HX, "X-CSRF-Token": csrf_for(c)}
        r = c.post(f"/grading/drafts/{draft_id}", data={**FORM, "next": "1"}, headers=headers)
    assert r.status_code == 200 and f'data-draft="{draft_id}"' not in r.text.split("grading-form")[0]
    writes = [i for i, s in enumerate(seen) if s.startswith(WRITES)]
    first_commit = seen.index("COMMIT")
    assert writes and max(writes) < first_commit  # the grade, its history and both reservations, then COMMIT
    # After the commit only reads: the next item (read after the commit, not under the write lock),
    # its KB, the saved draft's signals.
    assert any(" JOIN run ON " in s for s in seen[first_commit:])
    assert all(_reads(s) or s == "COMMIT" for s in seen[first_commit:])
    if app.state.engine.dialect.name == "sqlite":  # the write lock from the first statement on
        assert "BEGIN IMMEDIATE" in seen[:first_commit]
