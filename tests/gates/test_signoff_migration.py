"""Migration 0017 builds the one-sign-off-per-person index over a database that already holds duplicates."""

from __future__ import annotations

from sqlmodel import Session, col, select

from tests.gates.test_service import build_run
from tests.test_migrations import empty_db_url  # noqa: F401  (the fixture: a new database on each backend)
from webapp.auth.models import User, UserRole
from webapp.core.db import make_engine
from webapp.core.migrations_runner import upgrade
from webapp.gates.models import GateSignoff


def _user(s: Session, email: str, role: str) -> User:
    """Add a user as rows (the schema is 0014's: create_user would also write the audit log of 0020)."""
    user = User(email=email, password_hash="x")
    s.add(user)
    s.flush()
    s.add(UserRole(user_id=user.id or 0, role=role))
    return user


def test_upgrade_keeps_each_persons_first_signoff(empty_db_url: str) -> None:  # noqa: F811
    upgrade(empty_db_url, "0014_production_weekly")
    engine = make_engine(empty_db_url)
    try:
        with Session(engine, expire_on_commit=False) as s:
            run = build_run(s)
            pm, ml = _user(s, "pm@example.test", "pm"), _user(s, "ml@example.test", "ml_lead")

            def sign(user_id: int | None, role: str, decision: str) -> GateSignoff:
                row = GateSignoff(gate="pilot", run_id=run.id, user_id=user_id, role=role, verdict="fail",  # type: ignore[arg-type]
                                  decision=decision, report={})
                s.add(row)
                s.flush()
                return row

            first = sign(pm.id, "pm", "no_go")
            sign(pm.id, "pm", "go")  # stored twice before the index existed (a race)
            other = sign(ml.id, "ml_lead", "no_go")
            sign(pm.id, "pm", "no_go")
            s.commit()
        upgrade(empty_db_url)
        with Session(engine) as s:
            kept = s.exec(select(GateSignoff.id, GateSignoff.decision).order_by(col(GateSignoff.id))).all()
        assert [tuple(r) for r in kept] == [(first.id, "no_go"), (other.id, "no_go")]
    finally:
        engine.dispose()
