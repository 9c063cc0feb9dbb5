"""Settings, the eval spec, the database engine, the users/tokens CLI, and the small shared modules:
labels, word diffs, link checks, htmx fragments and the template warm-up."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import jinja2
import pydantic
import pytest
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlmodel import Session
from typer.testing import CliRunner

from tests.conftest import SPEC_PATH, TEST_SECRET, login
from webapp.app.cli import app as cli_app
from webapp.app.main import create_app
from webapp.app.warmup import build_routes, warm_up
from webapp.auth.service import Principal
from webapp.core.config import DEFAULT_SECRET_KEY, ConfigError, Settings
from webapp.core.db import make_engine, session_scope, write_transaction, writer
from webapp.core.labels import humanize
from webapp.core.spec import EvalSpec, SpecError, load_spec
from webapp.core.textdiff import Segment, changed_words, word_diff
from webapp.web.links import can_open, rule_for
from webapp.web.templating import templates

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def _spec_with(tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(SPEC_PATH.read_text())
    edit(data)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _rename_tone(d: dict) -> None:  # type: ignore[type-arg]
    d["rubric"]["criteria"][2]["key"] = "tone_of_voice"


def _scale_factual(d: dict) -> None:  # type: ignore[type-arg]
    d["rubric"]["criteria"][0]["key"] = "tone"
    d["rubric"]["criteria"][2]["key"] = "factual_accuracy"


class TestSpec:
    def test_project_spec_holds_the_plan_numbers(self) -> None:
        spec = load_spec(SPEC_PATH)
        assert (spec.checks.min_words, spec.checks.max_words, spec.checks.confidence_fallback) == (50, 500, 0.6)
        assert len(spec.intents) == 10 and spec.review.weekly_pairs == 20 and spec.review.monthly_pairs == 30
        assert spec.gates.pilot.automated_pass_rate == 0.8 and spec.gates.production.min_cases == 250
        assert spec.online_metrics.alerts["accept_rate"].days == 3 and spec.online_metrics.targets["latency_p95_s"].value == 4

    @pytest.mark.parametrize(
        ("edit", "match"),
        [
            (lambda d: d["checks"].update(min_words=-1), r"key 'checks\.min_words'"),
            (lambda d: d["grading"].update(graders_per_drafts=2), r"key 'grading\.graders_per_drafts'"),
            (lambda d: d.pop("rubric"), r"key 'rubric'"),
            # Issue 10, item 8: a renamed, missing or extra criterion would crash grading (KeyError) later.
            (_rename_tone, r"key 'rubric\.criteria\.2\.key'.*'tone_of_voice'.*tone"),
            (lambda d: d["rubric"]["criteria"].pop(3), r"key 'rubric\.criteria'.*missing.*completeness"),
            (_scale_factual, r"key 'rubric\.criteria\.0\.kind'.*'tone' is stored as scale"),
        ],
    )
    def test_bad_spec_names_the_file_and_key(self, tmp_path: Path, edit: Callable, match: str) -> None:
        with pytest.raises(SpecError, match=match) as err:
            load_spec(_spec_with(tmp_path, edit))
        assert str(err.value).startswith(f"{tmp_path / 'spec.yaml'}: ")

    def test_unreadable_files(self, tmp_path: Path) -> None:
        with pytest.raises(SpecError, match="not found"):
            load_spec(tmp_path / "nope.yaml")
        bad = tmp_path / "bad.yaml"
        bad.write_text("rubric: [unclosed")
        with pytest.raises(SpecError, match="not valid YAML"):
            load_spec(bad)

    def test_rubric_columns_are_the_grade_tables_columns(self) -> None:
        from webapp.core.spec import RUBRIC_COLUMNS
        from webapp.grading.models import FinalGrade, Grade, ReferenceGrade

        for table in (Grade, FinalGrade, ReferenceGrade):
            assert set(RUBRIC_COLUMNS) <= set(table.model_fields), table.__name__
        assert {c.key: c.kind for c in load_spec(SPEC_PATH).rubric.criteria} == RUBRIC_COLUMNS

    @pytest.mark.parametrize(
        ("edit", "match"),
        [
            (lambda d: d.update(timezone="Mars/Olympus"), r"key 'timezone'.*unknown time zone"),
            (_rename_tone, r"key 'rubric\.criteria\.2\.key'.*'tone_of_voice'"),
        ],
    )
    def test_malformed_spec_stops_start_up(self, tmp_path: Path, edit: Callable, match: str) -> None:
        with pytest.raises(SpecError, match=match):
            create_app(Settings(database_url="sqlite://", mode="dev", spec=_spec_with(tmp_path, edit)))


class TestSettings:
    def test_default_secret_refused_in_production(self) -> None:
        with pytest.raises(ConfigError, match="DRAFTDESK_SECRET_KEY"):
            Settings(mode="production", secret_key=DEFAULT_SECRET_KEY)
        assert Settings(mode="demo").secret_key == DEFAULT_SECRET_KEY
        assert Settings(mode="production", secret_key="s" * 40).mode == "production"

    def test_environment_prefix(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("DRAFTDESK_DATABASE_URL", "sqlite:////tmp/x.db")
        monkeypatch.setenv("DRAFTDESK_MODE", "dev")
        assert Settings().database_url == "sqlite:////tmp/x.db"


def test_sqlite_engine_uses_wal_foreign_keys_and_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'e.db'}")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000
    engine.dispose()


def _sqlite_with_table(tmp_path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path / 'w.db'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    return engine


def _begin_immediate_waits(engine: Engine) -> bool:
    """Tell whether another connection's BEGIN IMMEDIATE finds the write lock taken (a 50 ms busy timeout)."""
    other = engine.raw_connection()
    try:
        cur = other.cursor()
        cur.execute("PRAGMA busy_timeout=50")
        try:
            cur.execute("BEGIN IMMEDIATE")
        except Exception as err:  # noqa: BLE001 - sqlite3.OperationalError, through the pool's proxy
            assert "database is locked" in str(err)
            return True
        cur.execute("ROLLBACK")
        return False
    finally:
        other.close()


@pytest.mark.parametrize("writes", [True, False])
def test_a_writer_takes_the_sqlite_write_lock_at_begin_a_reader_does_not(tmp_path: Path, writes: bool) -> None:
    """A write request's transaction (writer(engine)) holds the write lock from its first statement, a read's does not."""
    engine = _sqlite_with_table(tmp_path)
    with Session(writer(engine) if writes else engine) as session:
        session.execute(text("SELECT count(*) FROM t")).scalar()  # the first statement: BEGIN [IMMEDIATE]
        assert _begin_immediate_waits(engine) is writes
        session.commit()
    assert not _begin_immediate_waits(engine)  # released at the commit
    with session_scope(engine) as job:  # a command or a job writes
        job.execute(text("SELECT 1"))
        assert _begin_immediate_waits(engine)
    with session_scope(engine, write=False) as job:
        job.execute(text("SELECT 1"))
        assert not _begin_immediate_waits(engine)
    engine.dispose()


@pytest.mark.parametrize("writes", [True, False])
def test_a_read_then_write_succeeds_in_a_writer_and_fails_in_a_read_transaction_on_sqlite(tmp_path: Path, writes: bool) -> None:
    """A transaction that read before another connection wrote cannot write after it, unless it began IMMEDIATE."""
    engine = _sqlite_with_table(tmp_path)
    with Session(writer(engine) if writes else engine) as session:
        with session.begin_nested():  # as the alert outbox reads, then writes (a savepoint opens the transaction)
            session.execute(text("SELECT count(*) FROM t")).scalar()
            other = threading.Thread(target=lambda: _insert(engine, 1))
            other.start()
            if not writes:
                other.join()  # it has written and committed; with the write lock held it would wait for ours
                with pytest.raises(OperationalError, match="database is locked"):
                    session.execute(text("INSERT INTO t VALUES (2)"))
            else:
                session.execute(text("INSERT INTO t VALUES (2)"))
        session.commit()
        other.join()
    with engine.connect() as conn:
        assert sorted(conn.execute(text("SELECT x FROM t")).scalars()) == ([1, 2] if writes else [1])
    engine.dispose()


def test_write_transaction_in_a_reader_commits_its_block_and_reads_on(tmp_path: Path) -> None:
    """A read request's small write: the read so far ends, the block takes the lock and commits, reading resumes."""
    engine = _sqlite_with_table(tmp_path)
    with Session(engine) as session:
        with session.begin_nested():  # a read transaction
            session.execute(text("SELECT count(*) FROM t")).scalar()
            _insert_elsewhere(engine, 1)  # another connection commits after our read began
        with write_transaction(session):
            session.execute(text("INSERT INTO t VALUES (2)"))  # no "database is locked": a fresh IMMEDIATE transaction
            assert _begin_immediate_waits(engine)
        assert not _begin_immediate_waits(engine)  # committed at the block's end
        assert session.execute(text("SELECT count(*) FROM t")).scalar() == 2
        session.rollback()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM t")).scalar() == 2
    engine.dispose()


def test_requests_begin_immediate_by_method(client_as: Callable[..., TestClient], app: FastAPI) -> None:
    """POST (and PUT, PATCH, DELETE) requests begin their SQLite transaction IMMEDIATE, GET requests leave it to the driver."""
    if app.state.engine.dialect.name != "sqlite":
        pytest.skip("BEGIN IMMEDIATE is SQLite's; PostgreSQL's transactions take row locks")
    lead = client_as("lead")
    begins: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.startswith("BEGIN"):
            begins.append(statement)

    event.listen(app.state.engine, "before_cursor_execute", seen)
    try:
        assert lead.get("/kb").status_code == 200
        got, begins[:] = list(begins), []
        assert lead.post("/logout", follow_redirects=False).status_code == 303
        posted = list(begins)
    finally:
        event.remove(app.state.engine, "before_cursor_execute", seen)
    assert got == []  # a page that only reads: no transaction (the driver begins one before a write)
    assert posted == ["BEGIN IMMEDIATE"]


def _insert_elsewhere(engine: Engine, x: int) -> None:
    """Insert from another thread (a connection of its own), waiting until it has committed."""
    thread = threading.Thread(target=lambda: _insert(engine, x))
    thread.start()
    thread.join()


def _insert(engine: Engine, x: int) -> None:
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (:x)"), {"x": x})


class TestUsersAndTokensCli:
    """The CLI migrates its database itself, so these start from an empty SQLite file."""

    def test_create_user_from_stdin_then_token_then_sign_in(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        db_url = f"sqlite:///{tmp_path / 'cli.db'}"
        monkeypatch.setenv("DRAFTDESK_DATABASE_URL", db_url)
        runner = CliRunner()
        r = runner.invoke(
            cli_app, ["users", "create", "--email", "Ops@Example.test", "--role", "admin", "--role", "pm"],
            input="a-long-password\n",
        )
        assert r.exit_code == 0, r.output
        assert "created ops@example.test with roles admin, pm" in r.output
        r = runner.invoke(cli_app, ["tokens", "create", "--email", "ops@example.test", "--name", "agent tool", "--scope", "ingest"])
        assert r.exit_code == 0, r.output
        token = r.output.strip().splitlines()[-1]
        assert token.startswith("dd_")
        listed = runner.invoke(cli_app, ["tokens", "list"]).output
        assert token not in listed and token[:10] in listed and "ingest" in listed
        app = create_app(Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH))
        with TestClient(app) as c:
            login(c, "ops@example.test", "a-long-password")
            assert c.get("/").status_code == 200
            assert c.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"}).json()["scopes"] == ["ingest"]
        app.state.engine.dispose()

    def test_bad_role_and_short_password_exit_2_with_the_field(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("DRAFTDESK_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
        runner = CliRunner()
        r = runner.invoke(cli_app, ["users", "create", "--email", "x@example.test", "--role", "root"], input="a-long-password\n")
        assert r.exit_code == 2 and "role: root is not one of" in r.output
        r = runner.invoke(cli_app, ["users", "create", "--email", "x@example.test", "--role", "pm"], input="short\n")
        assert r.exit_code == 2 and "password: must be at least 8 characters" in r.output
        assert "x@example.test" not in CliRunner().invoke(cli_app, ["users", "list"]).output


def test_id_from_ref_takes_ascii_digits_within_the_id_range_only() -> None:
    from webapp.core.db import MAX_ID, id_from_ref

    assert id_from_ref("42") == 42 and id_from_ref(" 7 ") == 7 and id_from_ref(5) == 5
    assert id_from_ref(str(2**63 - 1)) == MAX_ID == 9223372036854775807
    for not_an_id in ("¹6", "٣", "4²", "-1", "1e3", "", "run-1", str(2**63), -3):
        assert id_from_ref(not_an_id) is None, not_an_id


def test_field_keys_become_labels_and_other_words_stay() -> None:
    """Messages for people name fields as people know them."""
    assert humanize("unsupported_claim: quote it exactly") == "Unsupported claim: quote it exactly"
    assert humanize("handle_time_s 212.0 above target; reject_rate too") == (
        "Handle time 212.0 above target; Reject rate too"
    )
    # Unknown snake_case words and identifiers inside other tokens are left alone.
    unknown = "see golden-regression-2fa and some_other_key"
    assert humanize(unknown) == unknown


class TestWordDiff:
    """Checked against hand-worked examples."""

    def test_one_word_replaced(self) -> None:
        segs = word_diff("Your refund is on its way.", "Your credit is on its way.")
        assert segs == [Segment("equal", "Your "), Segment("delete", "refund"), Segment("insert", "credit"),
                        Segment("equal", " is on its way.")]
        assert changed_words(segs) == (1, 1)

    def test_both_sides_rebuild_exactly(self) -> None:
        old = "Hi Dana,\nthe add-on renews yearly."
        new = "Hi Dana, the add-on renews on its own cycle. Thanks!"
        segs = word_diff(old, new)
        assert "".join(s.text for s in segs if s.op != "insert").replace("\n", " ") == old.replace("\n", " ")
        assert "".join(s.text for s in segs if s.op != "delete") == new
        assert changed_words(segs) == (1, 5)

    def test_missing_text_is_all_insert(self) -> None:
        assert word_diff(None, "hello there") == [Segment("insert", "hello there")]
        assert word_diff("gone", None) == [Segment("delete", "gone")]


def test_can_open_follows_the_route_role_check_and_hides_no_unknown_or_public_path(app: FastAPI) -> None:
    def who(*roles: str) -> Principal:
        return Principal(user_id=1, email="x@example.test", name="X", roles=frozenset(roles))

    assert can_open(app, who("lead"), "/runs/compare?a=demo-run-1")
    assert not can_open(app, who("labeler"), "/runs/compare?a=demo-run-1")
    assert can_open(app, who("admin"), "/admin")
    assert not can_open(app, who("pm"), "/admin")
    assert not can_open(app, None, "/runs")
    assert rule_for(app, "/no/such/page") is None
    assert can_open(app, who("pm"), "/no/such/page")
    assert can_open(app, None, "/login")


def test_htmx_gets_a_fragment_a_history_restore_the_page(client_as: Callable[..., TestClient]) -> None:
    lead = client_as("lead")
    page = lead.get("/kb")
    fragment = lead.get("/kb", headers={"HX-Request": "true"})
    restore = lead.get("/kb", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in page.text and "<html" not in fragment.text and "<html" in restore.text
    for r in (page, fragment, restore):
        assert "HX-Request" in r.headers["vary"]


def test_warm_up_compiles_every_template(spec: EvalSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every template is compiled before the first request."""
    on_disk = sorted(p.relative_to(TEMPLATES).as_posix() for p in TEMPLATES.rglob("*.html"))
    assert len(on_disk) > 40
    assert warm_up(spec) == len(on_disk)

    # after the warm-up, rendering a page loads nothing from disk: every template is in the cache
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"template loaded after the warm-up: {args[1:2]}")

    monkeypatch.setattr(jinja2.FileSystemLoader, "get_source", refuse)
    for name in on_disk:
        templates.env.get_template(name)


def test_warm_settles_the_serving_interpreter(tmp_path: Path) -> None:
    """`serve`'s warm-up freezes the start-up objects and shortens the switch interval (in a process of its own: both are process-wide)."""
    script = (
        "import gc, sys\n"
        "from webapp.app.main import create_app\n"
        "from webapp.app.warmup import SWITCH_INTERVAL_S, warm\n"
        "from webapp.core.config import Settings\n"
        "from webapp.core.migrations_runner import upgrade\n"
        f"url = 'sqlite:///{tmp_path / 'w.db'}'\n"
        "upgrade(url)\n"
        f"app = create_app(Settings(database_url=url, mode='dev', secret_key={TEST_SECRET!r}, spec={str(SPEC_PATH)!r}))\n"
        "before = (gc.get_freeze_count(), sys.getswitchinterval())\n"
        "warm(app)\n"
        "print(*before, gc.get_freeze_count(), sys.getswitchinterval(), SWITCH_INTERVAL_S)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120).stdout
    frozen_before, switch_before, frozen, switch, wanted = (float(x) for x in out.split())
    assert (frozen_before, switch_before) == (0, 0.005)  # Python's defaults until the warm-up
    assert frozen > 100_000  # the start-up's objects (modules, routes, templates): full collections skip them
    assert switch == wanted == 0.0005


@pytest.mark.parametrize("warmed", [True, False])
def test_warm_up_builds_every_route(app: FastAPI, client_as, monkeypatch: pytest.MonkeyPatch, warmed: bool) -> None:  # type: ignore[no-untyped-def]
    """FastAPI builds a router's routes (their parameters' pydantic models) on the first request reaching it."""
    if warmed:
        assert build_routes(app) > 100  # every API route of every router, built
    built: list[type] = []
    init = pydantic.TypeAdapter.__init__

    def counting(self: pydantic.TypeAdapter, *args: object, **kwargs: object) -> None:  # type: ignore[type-arg]
        built.append(type(self))
        init(self, *args, **kwargs)

    monkeypatch.setattr(pydantic.TypeAdapter, "__init__", counting)
    lead = client_as("lead")  # signs in through the login form; a signed-in page reads the link rules
    assert lead.get("/grading").status_code == 200
    assert (built == []) is warmed  # not warmed: the first requests built the routes (the test can fail)
