"""The append-only regression suite, and the regression alerts raised when a run is checked."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import DDL, JSON, Column, Text, UniqueConstraint, event, inspect
from sqlmodel import Field, SQLModel
from sqlmodel.sql.sqltypes import AutoString

# The kinds of alert (golden_check | golden_factual | pass_rate_drop) are named by webapp.checks.types, below this
# domain, because the re-check API (webapp.checks) answers with the alerts its check raised.
from webapp.checks.types import RegressionAlertKind as RegressionAlertKind
from webapp.core.timeutil import aware_datetime_type, utcnow


class RegressionCaseBase(SQLModel):
    """A regression case's fields as stored and as the API shows them (webapp.regression.schemas)."""

    case_id: str = Field(max_length=200, unique=True, index=True)
    input: str = Field(sa_column=Column(Text, nullable=False))
    note: str = Field(sa_column=Column(Text, nullable=False))
    source: str = Field(max_length=12)  # golden | run | grading | review
    source_ref: str | None = Field(default=None, max_length=300)
    category: str | None = Field(default=None, max_length=20)
    intent: str | None = Field(default=None, max_length=60)
    expected_behavior: str | None = Field(default=None, max_length=20)
    reference: str | None = Field(default=None, sa_column=Column(Text))
    kb_articles: list[str] | None = Field(default=None, sa_column=Column(JSON))
    created_by: int = Field(foreign_key="app_user.id", index=True)


class RegressionCase(RegressionCaseBase, table=True):
    """One case of the regression suite. Rows are never updated or deleted (the database refuses)."""

    __tablename__: ClassVar[str] = "regression_case"

    id: int | None = Field(default=None, primary_key=True)
    account: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    conversation: list[Any] | None = Field(default=None, sa_column=Column(JSON))
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class RegressionAlert(SQLModel, table=True):
    """A regression found when a run was checked (or graded): a golden example failing, or a pass-rate drop."""

    __tablename__: ClassVar[str] = "regression_alert"
    __table_args__ = (UniqueConstraint("run_id", "fingerprint", name="uq_regression_alert_run_fingerprint"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    kind: RegressionAlertKind = Field(sa_type=AutoString(length=30))
    # The same finding on the same run is raised once, however often the run is re-checked.
    fingerprint: str = Field(max_length=300)
    message: str = Field(sa_column=Column(Text, nullable=False))
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    acknowledged_by: int | None = Field(default=None, foreign_key="app_user.id")
    acknowledged_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())


# --- append-only, enforced by the database ------------------------------------------------------------
# The migration must create the same triggers: these constants are the exact SQL for each dialect.

APPEND_ONLY_MESSAGE = "regression cases are append-only"

SQLITE_APPEND_ONLY_DDL: tuple[str, ...] = (
    "CREATE TRIGGER regression_case_no_update BEFORE UPDATE ON regression_case "
    f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}: update refused'); END",
    "CREATE TRIGGER regression_case_no_delete BEFORE DELETE ON regression_case "
    f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}: delete refused'); END",
)

POSTGRESQL_APPEND_ONLY_DDL: tuple[str, ...] = (
    "CREATE OR REPLACE FUNCTION regression_case_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
    f"BEGIN RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}: % refused', lower(TG_OP); END $$",
    "CREATE TRIGGER regression_case_no_update_delete BEFORE UPDATE OR DELETE ON regression_case "
    "FOR EACH ROW EXECUTE FUNCTION regression_case_append_only()",
)

_CASE_TABLE = inspect(RegressionCase).local_table  # the mapper's table: typed, unlike the class's __table__
for _sql in SQLITE_APPEND_ONLY_DDL:
    event.listen(_CASE_TABLE, "after_create", DDL(_sql).execute_if(dialect="sqlite"))
for _sql in POSTGRESQL_APPEND_ONLY_DDL:
    # DDL() formats its text with %-substitution first, so the one literal % is doubled here.
    event.listen(_CASE_TABLE, "after_create", DDL(_sql.replace("%", "%%")).execute_if(dialect="postgresql"))
