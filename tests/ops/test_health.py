"""`/healthz` asks the database; `/livez` does not; neither needs a login."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from webapp.core.db import make_engine


def test_both_answer_ok_without_a_login_and_healthz_is_503_with_a_reason_when_the_database_is_unreachable(
    client: TestClient, db_url: str, tmp_path: Path
) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/livez")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    # The same kind of database, somewhere it cannot be opened (a missing folder; a closed port).
    gone = f"sqlite:///{tmp_path / 'gone' / 'missing.db'}"
    if not db_url.startswith("sqlite"):
        gone = "postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2"
    app = client.app
    good = app.state.engine  # type: ignore[attr-defined]
    app.state.engine = make_engine(gone)  # type: ignore[attr-defined]
    try:
        r = client.get("/healthz")
        assert r.status_code == 503
        assert r.json() == {"status": "unavailable", "reason": "database unreachable (OperationalError)"}
        # /livez never touches the database: still 200.
        assert client.get("/livez").status_code == 200
    finally:
        app.state.engine.dispose()  # type: ignore[attr-defined]
        app.state.engine = good  # type: ignore[attr-defined]
    assert client.get("/healthz").status_code == 200
