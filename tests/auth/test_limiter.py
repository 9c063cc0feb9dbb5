"""The sign-in limiter: race-safe counting, per (account, address), and the per-account ceiling (issue #33)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from tests.conftest import TEST_SECRET
from tests.factories import DEFAULT_PASSWORD, make_user
from webapp.auth import service
from webapp.auth.models import LoginAttempt, User
from webapp.core.db import writer
from webapp.core.security import CSRF_COOKIE, SESSION_COOKIE, csrf_token_for

PM = "pm@example.test"
ATTACKER = ("203.0.113.66", 40000)
PM_DESK = ("198.51.100.7", 40000)


@pytest.fixture
def pm(session: Session) -> User:
    user = make_user(session, email=PM, roles=["pm"])
    session.commit()
    return user


@contextmanager
def client_from(app: FastAPI, address: tuple[str, int]) -> Iterator[TestClient]:
    """A browser connecting from `address`, with the login page's CSRF cookie."""
    with TestClient(app, client=address) as c:
        c.get("/login")
        yield c


def try_password(c: TestClient, password: str, email: str = PM) -> tuple[int, str]:
    """Post the login form; return the answer's status and text."""
    token = csrf_token_for(TEST_SECRET, c.cookies[CSRF_COOKIE], c.cookies.get(SESSION_COOKIE))
    data = {"email": email, "password": password, "csrf_token": token}
    r = c.post("/login", data=data, follow_redirects=False)
    return r.status_code, r.text


def failed_attempts(session: Session) -> int:
    query = select(func.count()).select_from(LoginAttempt).where(col(LoginAttempt.success).is_(False))
    return session.exec(query).one()


class TestConcurrentWrongPasswords:
    def test_twenty_at_once_get_at_most_five_password_checks(
        self, app: FastAPI, session: Session, pm: User
    ) -> None:
        """20 browsers from one address post a wrong password at the same moment: 5 are checked, 15 refused."""
        barrier = threading.Barrier(20)
        statuses: list[int] = []
        lock = threading.Lock()

        def attempt() -> None:
            with client_from(app, ATTACKER) as c:
                barrier.wait(timeout=60)
                status, _ = try_password(c, "wrong-password")
            with lock:
                statuses.append(status)

        threads = [threading.Thread(target=attempt) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        # a 401 is a wrong password that was checked; a 429 one refused before any check
        assert sorted(statuses) == [401] * 5 + [429] * 15
        session.expire_all()
        assert failed_attempts(session) == 5

    def test_service_checks_at_most_five_passwords_among_twenty_sessions(
        self, engine: Engine, pm: User, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The same race at the service: each thread its own transaction, counted calls of the real verifier."""
        checked: list[str] = []
        real_verify = service.verify_password

        def counting_verify(password_hash: str, password: str) -> bool:
            checked.append(password)
            return real_verify(password_hash, password)

        monkeypatch.setattr(service, "verify_password", counting_verify)
        limits = service.LoginLimits(max_failures=5, account_max_failures=50, window_minutes=15)
        barrier = threading.Barrier(20)
        outcomes: list[str] = []

        def attempt() -> None:
            barrier.wait(timeout=60)
            with Session(writer(engine)) as s:  # a writer, as the sign-in POST it stands for (webapp/core/db.py)
                try:
                    user = service.sign_in(session=s, email=PM, password="wrong", ip="10.1.1.1", limits=limits)
                    outcomes.append("checked" if user is None else "signed in")
                except service.LoginBlocked:
                    outcomes.append("blocked")
                s.commit()

        threads = [threading.Thread(target=attempt) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert sorted(outcomes) == ["blocked"] * 15 + ["checked"] * 5
        assert len(checked) == 5


class TestPerAddressLock:
    def test_an_attacker_locks_out_only_their_own_address(self, app: FastAPI, pm: User) -> None:
        with client_from(app, ATTACKER) as attacker:
            assert [try_password(attacker, f"guess-{i}")[0] for i in range(5)] == [401] * 5
            status, text = try_password(attacker, DEFAULT_PASSWORD)  # even the right password: not checked
            assert status == 429 and "Too many failed sign-ins" in text
        with client_from(app, PM_DESK) as desk:
            status, text = try_password(desk, DEFAULT_PASSWORD)
            assert status == 303, text
            assert desk.get("/", follow_redirects=False).status_code == 200

    def test_an_address_trying_many_accounts_meets_its_ceiling(self, app: FastAPI, pm: User) -> None:
        """Four times the per-account limit, over any accounts, from one address (password spraying)."""
        with client_from(app, ATTACKER) as attacker:
            statuses = [try_password(attacker, "Spring2026!", email=f"u{i}@example.test")[0] for i in range(21)]
        assert statuses == [401] * 20 + [429]


class TestPerAccountCeiling:
    LIMITS = service.LoginLimits(max_failures=2, account_max_failures=4, window_minutes=15)

    def attempt(self, session: Session, ip: str, password: str) -> str:
        try:
            user = service.sign_in(session=session, email=PM, password=password, ip=ip, limits=self.LIMITS)
        except service.LoginBlocked:
            return "blocked"
        finally:
            session.commit()
        return "wrong" if user is None else "signed in"

    def test_guessing_from_many_addresses_stops_at_the_ceiling_but_not_for_known_addresses(
        self, session: Session, pm: User
    ) -> None:
        assert self.attempt(session, "198.51.100.7", DEFAULT_PASSWORD) == "signed in"  # the PM's desk, known
        guesses = [self.attempt(session, ip, "guess") for ip in ("10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2")]
        assert guesses == ["wrong"] * 4
        # 4 failures in the window: a new address is refused without a check, even with the right password
        assert self.attempt(session, "10.0.0.3", DEFAULT_PASSWORD) == "blocked"
        # the address the PM signed in from before still may
        assert self.attempt(session, "198.51.100.7", DEFAULT_PASSWORD) == "signed in"


class TestPasswordCheckedOutsideTheLock:
    def test_the_sign_in_locks_are_free_while_the_password_is_checked(
        self, app: FastAPI, engine: Engine, session: Session, pm: User, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The argon2 check (~0.2 s) holds no lock: on SQLite another writer takes the one write lock during
        it, on PostgreSQL the account's advisory lock is free; the attempt is counted before and settled after."""
        free: list[bool] = []
        real_verify = service.verify_password

        def verify_while_locking(password_hash: str, password: str) -> bool:
            raw = engine.raw_connection()
            try:
                cur = raw.cursor()
                if engine.dialect.name == "sqlite":
                    cur.execute("PRAGMA busy_timeout=200")
                    try:
                        cur.execute("BEGIN IMMEDIATE")  # what a grade save or an events batch begins with
                        cur.execute("ROLLBACK")
                        free.append(True)
                    except Exception:
                        free.append(False)
                    cur.execute("PRAGMA busy_timeout=30000")
                else:
                    cur.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", (f"login-email:{PM}",))
                    free.append(bool(cur.fetchone()[0]))
                    raw.rollback()
                # the attempt is already stored, as a failure, by the time the password is checked
                with Session(engine) as other:
                    pending = other.exec(select(LoginAttempt).where(LoginAttempt.email == PM)).all()
                    assert [a.success for a in pending] == [False]
            finally:
                raw.close()
            return real_verify(password_hash, password)

        monkeypatch.setattr(service, "verify_password", verify_while_locking)
        with client_from(app, PM_DESK) as desk:
            status, text = try_password(desk, DEFAULT_PASSWORD)
        assert status == 303, text
        assert free == [True]
        session.expire_all()
        assert [a.success for a in session.exec(select(LoginAttempt).where(LoginAttempt.email == PM)).all()] == [True]

    @pytest.mark.parametrize("change", ["deactivated", "password changed"])
    def test_an_account_changed_during_the_check_does_not_sign_in(
        self, app: FastAPI, engine: Engine, session: Session, pm: User, monkeypatch: pytest.MonkeyPatch, change: str
    ) -> None:
        """The check runs outside the transaction: an admin who deactivates the account or sets a new
        password meanwhile wins, and the attempt stays a failure."""
        real_verify = service.verify_password

        def verify_then_change(password_hash: str, password: str) -> bool:
            ok = real_verify(password_hash, password)
            with Session(engine) as admin:
                user = admin.exec(select(User).where(User.email == PM)).one()
                if change == "deactivated":
                    user.is_active = False
                else:
                    user.password_hash = service.hash_password("a new password, 2026")
                admin.add(user)
                admin.commit()
            return ok

        monkeypatch.setattr(service, "verify_password", verify_then_change)
        with client_from(app, PM_DESK) as desk:
            status, _ = try_password(desk, DEFAULT_PASSWORD)
            assert status != 303 and SESSION_COOKIE not in desk.cookies
        session.expire_all()
        assert [a.success for a in session.exec(select(LoginAttempt).where(LoginAttempt.email == PM)).all()] == [False]
