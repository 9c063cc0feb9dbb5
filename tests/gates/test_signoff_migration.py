"""Migration 0017 builds the one-sign-off-per-person index over a database that already holds duplicates."""

from __future__ import annotations

from sqlalchemy import text
from sqlmodel import Session, col, select

from tests.factories import make_dataset
from tests.test_migrations import empty_db_url  # noqa: F401  (the fixture: a new database on each backend)
from webapp.auth.models import User
from webapp.core.db import make_engine
from webapp.core.migrations_runner import upgrade
from webapp.core.timeutil import utcnow
from webapp.gates.models import GateSignoff


def _user(s: Session, email: str, role: str) -> User:
    """Add a user as rows of 0014's schema (create_user would also write the audit log of a later migration)."""
    user = User(email=email, password_hash="x")
    s.add(user)
    s.flush()
    # the role as a row of 0014's user_role (the ORM's UserRole has the `source` column of 0020)
    s.execute(text("INSERT INTO user_role (user_id, role) VALUES (:u, :r)"), {"u": user.id, "r": role})
    return user


def test_upgrade_keeps_each_persons_first_signoff(empty_db_url: str) -> None:  # noqa: F811
    upgrade(empty_db_url, "0014_production_weekly")
    engine = make_engine(empty_db_url)
    try:
        with Session(engine, expire_on_commit=False) as s:
            # The run row in the schema of 0014 (the ORM's Run has columns of later migrations).
            ds = make_dataset(s, [{"case_id": "c1"}])
            s.execute(
                text(
                    "INSERT INTO run (name, model, prompt_version, notes, source, is_baseline, dataset_id, created_at) "
                    "VALUES ('run-1', '', '', '', 'import', :no, :ds, :at)"
                ),
                {"no": False, "ds": ds.id, "at": utcnow()},
            )
            run_id = s.execute(text("SELECT id FROM run WHERE name = 'run-1'")).scalar_one()
            pm, ml = _user(s, "pm@example.test", "pm"), _user(s, "ml@example.test", "ml_lead")

            def sign(user_id: int | None, role: str, decision: str) -> GateSignoff:
                row = GateSignoff(gate="pilot", run_id=run_id, user_id=user_id, role=role, verdict="fail",  # type: ignore[arg-type]
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
