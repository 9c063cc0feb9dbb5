"""Test fixtures: a real database per test (SQLite always; PostgreSQL too when
DRAFTDESK_TEST_DATABASE_URL is set), the app, and signed-in clients for any role.

Database-backed tests take the `db_url` fixture (directly or through `session`, `app`,
`client`...), which is parametrized over the configured backends, so each such test runs
once per database. SQLite tests get a fresh copy of a template file made once per session;
PostgreSQL tests share one schema that is truncated before each test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Templates render with StrictUndefined in every test, this process's and the servers it starts
# (webapp/web/templating.py reads it at import): a view field a template reads and lacks fails.
os.environ["DRAFTDESK_STRICT_TEMPLATES"] = "1"

from argon2 import PasswordHasher
from fastapi.testclient import TestClient
from sqlalchemy import Integer, make_url, text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.factories import DEFAULT_PASSWORD, make_user
from webapp.app.main import create_app
from webapp.auth import service as auth_service
from webapp.core.config import Settings
from webapp.core.db import make_engine
from webapp.core.models import metadata
from webapp.core.security import CSRF_COOKIE, SESSION_COOKIE, csrf_token_for
from webapp.core.spec import EvalSpec, load_spec

# Cheap Argon2 parameters for the many users tests create (hashes carry their own parameters, so
# verification is unchanged; production keeps argon2-cffi's defaults).
auth_service._hasher = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)

def _per_worker_database(url: str) -> str:
    """Give each pytest-xdist worker its own PostgreSQL database beside the configured one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not url or not worker:
        return url
    base = make_url(url)
    name = f"{base.database}_{worker}"
    admin = make_engine(url).execution_options(isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            if conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first() is None:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


PG_URL = _per_worker_database(os.environ.get("DRAFTDESK_TEST_DATABASE_URL", "").strip())
BACKENDS = ["sqlite"] + (["postgresql"] if PG_URL else [])
TEST_SECRET = "test-secret-key-not-for-production"
SPEC_PATH = Path(__file__).resolve().parent.parent / "data" / "eval_spec.yaml"


@pytest.fixture(scope="session")
def spec() -> EvalSpec:
    """The project's eval spec (data/eval_spec.yaml)."""
    return load_spec(SPEC_PATH)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    engine = make_engine(f"sqlite:///{path}")
    metadata.create_all(engine)
    engine.dispose()
    _stamp_head(f"sqlite:///{path}")
    engine = make_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
    engine.dispose()
    return path


def _stamp_head(url: str) -> None:
    """Record the schema made by create_all as migrated to head, so the CLI's own upgrade finds
    nothing to do and CLI tests can open their real session on the test database."""
    from alembic import command

    from webapp.core.migrations_runner import alembic_config

    command.stamp(alembic_config(url), "head")


_pg_ready = False


def _prepare_pg() -> None:
    global _pg_ready
    if _pg_ready:
        return
    engine = make_engine(PG_URL)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    metadata.create_all(engine)
    engine.dispose()
    _stamp_head(PG_URL)
    _pg_ready = True


def _truncate_pg() -> None:
    engine = make_engine(PG_URL)
    names = ", ".join(f'"{t.name}"' for t in metadata.sorted_tables)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    engine.dispose()


def empty_database_url(backend: str, directory: Path, sqlite_template: Path) -> str:
    """Return a database with the full schema and no rows: a copy of the SQLite template, or the
    (truncated) PostgreSQL test database. Module-scoped fixtures that seed the demo once use it."""
    if backend == "sqlite":
        path = directory / "test.db"
        shutil.copyfile(sqlite_template, path)
        return f"sqlite:///{path}"
    _prepare_pg()
    _truncate_pg()
    return PG_URL


DEMO_SCHEMA = "demo_template"


class DemoTemplate:
    """The demo seeded once per test session (and xdist worker) on each backend, copied per use.

    Seeding takes seconds; copying takes milliseconds (SQLite) or a fraction of a second
    (PostgreSQL). SQLite: the demo is seeded into a file and each use gets a copy of that file.
    PostgreSQL: the demo is seeded once into the worker's test database and its rows are kept in
    a schema of plain tables beside `public`; each use truncates `public` (as every test does)
    and copies the rows back with INSERT ... SELECT, then moves each id sequence past its rows.
    That is a database-per-test without CREATE/DROP DATABASE: `CREATE DATABASE ... TEMPLATE`
    took 0.5-2 s per copy and each DROP DATABASE forces a checkpoint, 3-4 s on the shared machine.
    Tests of the seeding itself (tests/demo/) still seed for real.
    """

    def __init__(self, spec: EvalSpec, sqlite_template: Path, directory: Path) -> None:
        self.spec = spec
        self.sqlite_template = sqlite_template
        self.directory = directory
        self._sqlite: Path | None = None
        self._pg_ready = False

    def _seed(self, url: str) -> None:
        from webapp.demo.seed import seed_demo

        engine = make_engine(url)
        try:
            with Session(engine, expire_on_commit=False) as session:
                seed_demo(session=session, spec=self.spec)
                session.commit()
            if url.startswith("sqlite"):
                with engine.connect() as conn:
                    conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        finally:
            engine.dispose()

    def copy(self, backend: str, directory: Path) -> str:
        """Return the URL of a fresh copy of the seeded demo on `backend` (sqlite or postgresql)."""
        if backend == "sqlite":
            if self._sqlite is None:
                self._sqlite = self.directory / "demo-template.db"
                shutil.copyfile(self.sqlite_template, self._sqlite)
                self._seed(f"sqlite:///{self._sqlite}")
            path = directory / "demo.db"
            shutil.copyfile(self._sqlite, path)
            return f"sqlite:///{path}"
        url = empty_database_url("postgresql", directory, self.sqlite_template)
        engine = make_engine(url)
        try:
            if not self._pg_ready:
                self._seed(url)
                with engine.begin() as conn:
                    conn.execute(text(f'DROP SCHEMA IF EXISTS "{DEMO_SCHEMA}" CASCADE'))
                    conn.execute(text(f'CREATE SCHEMA "{DEMO_SCHEMA}"'))
                    for table in metadata.sorted_tables:
                        conn.execute(text(f'CREATE TABLE "{DEMO_SCHEMA}"."{table.name}" AS TABLE public."{table.name}"'))
                self._pg_ready = True
                return url
            with engine.begin() as conn:
                for table in metadata.sorted_tables:
                    conn.execute(text(f'INSERT INTO public."{table.name}" SELECT * FROM "{DEMO_SCHEMA}"."{table.name}"'))
                    for column in table.primary_key.columns:
                        if not isinstance(column.type, Integer):
                            continue
                        # An integer key without a sequence (pg_get_serial_sequence is null) matches no row.
                        conn.execute(
                            text(
                                f'SELECT setval(seq, max("{column.name}") + 1, false) '
                                f'FROM public."{table.name}", pg_get_serial_sequence(:t, :c) AS seq '
                                "WHERE seq IS NOT NULL GROUP BY seq"
                            ),
                            {"t": f'public."{table.name}"', "c": column.name},
                        )
        finally:
            engine.dispose()
        return url


@pytest.fixture(scope="session")
def demo_template(spec: EvalSpec, sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> DemoTemplate:
    """The seeded demo, made at most once per session and backend (see DemoTemplate)."""
    return DemoTemplate(spec, sqlite_template, tmp_path_factory.mktemp("demo"))


@pytest.fixture(params=BACKENDS)
def demo_db_url(request: pytest.FixtureRequest, tmp_path: Path, demo_template: DemoTemplate) -> str:
    """A fresh copy of the seeded demo, on each configured backend.

    A test module whose tests all start from the demo overrides `db_url` with it, so `session`,
    `app` and the clients work on the demo."""
    return demo_template.copy(request.param, tmp_path)


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path) -> str:
    """A database URL with the full schema and no rows, on each configured backend."""
    return empty_database_url(request.param, tmp_path, sqlite_template)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    """A session on the test database; tests commit what the app must see."""
    with Session(engine, expire_on_commit=False) as s:
        yield s


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH)


@pytest.fixture
def app(settings: Settings):  # type: ignore[no-untyped-def]
    application = create_app(settings)
    yield application
    application.state.engine.dispose()


@pytest.fixture
def client(app) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    """An anonymous client."""
    with TestClient(app) as c:
        yield c


def login(client: TestClient, email: str, password: str = DEFAULT_PASSWORD) -> TestClient:
    """Sign the client in through the login form; afterwards it sends the CSRF header on every call."""
    client.get("/login")
    token = csrf_token_for(TEST_SECRET, client.cookies[CSRF_COOKIE], client.cookies.get(SESSION_COOKIE))
    r = client.post(
        "/login", data={"email": email, "password": password, "csrf_token": token}, follow_redirects=False
    )
    assert r.status_code == 303, r.text
    client.headers["X-CSRF-Token"] = csrf_token_for(TEST_SECRET, client.cookies[CSRF_COOKIE], client.cookies.get(SESSION_COOKIE))
    return client


def csrf_for(client: TestClient) -> str:
    """Return the CSRF token that matches the client's cookie (for form posts)."""
    if CSRF_COOKIE not in client.cookies:
        client.get("/login")
    return csrf_token_for(TEST_SECRET, client.cookies[CSRF_COOKIE], client.cookies.get(SESSION_COOKIE))


@pytest.fixture
def client_as(app, session: Session) -> Iterator[Callable[..., TestClient]]:  # type: ignore[no-untyped-def]
    """Factory: client_as("lead") or client_as("labeler", "pm", email=...) -> a signed-in client."""
    opened: list[TestClient] = []
    counter = iter(range(1, 10_000))

    def _make(*roles: str, email: str | None = None) -> TestClient:
        email = email or f"{'-'.join(roles) or 'user'}{next(counter)}@example.test"
        if auth_service.get_user_by_email(session=session, email=email) is None:
            make_user(session, email=email, roles=list(roles))
            session.commit()
        c = TestClient(app)
        c.__enter__()
        opened.append(c)
        return login(c, email)

    yield _make
    for c in opened:
        c.__exit__(None, None, None)


@pytest.fixture
def api_as(app, session: Session) -> Iterator[Callable[..., TestClient]]:  # type: ignore[no-untyped-def]
    """Factory: api_as("lead") or api_as(scopes=["ingest"]) -> a client sending a bearer token."""
    opened: list[TestClient] = []
    counter = iter(range(1, 10_000))

    def _make(*roles: str, scopes: list[str] | None = None, email: str | None = None) -> TestClient:
        email = email or f"api-{'-'.join(roles) or 'agent'}{next(counter)}@example.test"
        user = auth_service.get_user_by_email(session=session, email=email)
        if user is None:
            user = make_user(session, email=email, roles=list(roles) or ["labeler"])
        _, plain = auth_service.create_token(session=session, user=user, name="test", scopes=scopes or None)
        session.commit()
        c = TestClient(app, headers={"Authorization": f"Bearer {plain}"})
        c.__enter__()
        opened.append(c)
        return c

    yield _make
    for c in opened:
        c.__exit__(None, None, None)


BROWSER_FIXTURES = frozenset({"browser", "new_page"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that drives Chromium `browser`, wherever it lives, so `-m "not browser"` skips them all."""
    for item in items:
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)


# Browser fixtures (live_server, browser, new_page) for any test that drives Chromium.
from tests.browser_support import browser, live_server, new_page  # noqa: E402,F401
