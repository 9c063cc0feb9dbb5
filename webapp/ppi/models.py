"""The judge's scores of every draft, the frozen error model, and the append-only sample draws."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import DDL, JSON, Column, UniqueConstraint, event, inspect
from sqlmodel import Field, SQLModel

from webapp.core.timeutil import aware_datetime_type, utcnow


class PpiJudgeScore(SQLModel, table=True):
    """The judge's four criterion scores of one draft under one frozen judge version, with its raw calls."""

    __tablename__: ClassVar[str] = "ppi_judge_score"
    __table_args__ = (UniqueConstraint("draft_id", "judge_version", name="uq_ppi_judge_score_draft_version"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    draft_id: int = Field(foreign_key="draft.id", index=True)
    judge_version: str = Field(max_length=200)
    factual_accuracy: str = Field(max_length=4)  # pass | fail
    citation_relevance: float
    tone: float
    completeness: float
    # Every call made for this draft: [{"request": {...}, "response": "...", "model": "..."}, ...]
    raw_calls: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # The judge's signals for the learned predictor (issue 35), None for a single-call pass made before it:
    # {"calls": [{four criteria}, ...] the primary judge's parsed calls (failed calls are not here),
    #  "second": {four criteria} | None the second judge's answer,
    #  "expected": {four criteria as floats; factual = P(pass)} | None the log-prob expectation of the first call}
    # The four columns above are the primary judge's first parsed call: the single-score estimate reads them.
    signals: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    calls: int = 1  # judge calls made for this draft (every call of both judges, failed ones included)
    cost_usd: float | None = None  # what those calls cost, when the judge configuration gives prices
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class PpiErrorModel(SQLModel, table=True):
    """An error model as it was frozen before a sample was drawn (webapp.ppi.sampler.ErrorModel.as_json)."""

    __tablename__: ClassVar[str] = "ppi_error_model"

    id: int | None = Field(default=None, primary_key=True)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    source_runs: list[int] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class PpiDraw(SQLModel, table=True):
    """One draft's inclusion probability and Bernoulli draw in one sampling round of a run. Never updated or deleted."""

    __tablename__: ClassVar[str] = "ppi_draw"
    __table_args__ = (UniqueConstraint("run_id", "draft_id", "round", name="uq_ppi_draw_run_draft_round"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    draft_id: int = Field(foreign_key="draft.id", index=True)
    round: int = 1  # 1: the sample; 2, 3...: further samples drawn to settle an undecided gate
    stratum: str = Field(max_length=20)
    forced: bool = False
    judge_version: str = Field(max_length=200)
    judge_score: float  # the judge's overall score the error model read
    pi: float  # this round's inclusion probability
    combined_pi: float  # 1 - prod over rounds so far of (1 - pi): the probability used by the estimator
    drawn: bool
    seed: int
    budget: float
    error_model_id: int | None = Field(default=None, foreign_key="ppi_error_model.id")
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


# The migration creates the same triggers: these constants are the exact SQL for each dialect.
APPEND_ONLY_MESSAGE = "ppi draws are append-only"

SQLITE_APPEND_ONLY_DDL: tuple[str, ...] = (
    "CREATE TRIGGER ppi_draw_no_update BEFORE UPDATE ON ppi_draw "
    f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}: update refused'); END",
    "CREATE TRIGGER ppi_draw_no_delete BEFORE DELETE ON ppi_draw "
    f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}: delete refused'); END",
)

POSTGRESQL_APPEND_ONLY_DDL: tuple[str, ...] = (
    "CREATE OR REPLACE FUNCTION ppi_draw_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
    f"BEGIN RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}: % refused', lower(TG_OP); END $$",
    "CREATE TRIGGER ppi_draw_no_update_delete BEFORE UPDATE OR DELETE ON ppi_draw "
    "FOR EACH ROW EXECUTE FUNCTION ppi_draw_append_only()",
)

_DRAW_TABLE = inspect(PpiDraw).local_table
for _sql in SQLITE_APPEND_ONLY_DDL:
    event.listen(_DRAW_TABLE, "after_create", DDL(_sql).execute_if(dialect="sqlite"))
for _sql in POSTGRESQL_APPEND_ONLY_DDL:
    # DDL() formats its text with %-substitution first, so the one literal % is doubled here.
    event.listen(_DRAW_TABLE, "after_create", DDL(_sql.replace("%", "%%")).execute_if(dialect="postgresql"))


class PpiProductionWeek(SQLModel, table=True):
    """One ISO week of production drafts turned into a run (its drafts judged, a sample of them graded by people).

    One row per week (unique): asking again for a week that has its run reports it, never a second one.
    """

    __tablename__: ClassVar[str] = "ppi_production_week"

    id: int | None = Field(default=None, primary_key=True)
    week: str = Field(max_length=10, unique=True)  # ISO week, "2026-W47"
    run_id: int = Field(foreign_key="run.id", index=True)
    events_with_draft: int  # the week's production events that had a draft
    drafts_taken: int  # drafts in the run: all of them, or `cap` drawn uniformly at random with `cap_seed`
    cap: int  # the setting DRAFTDESK_PPI_WEEKLY_DRAFT_CAP when the run was made
    cap_seed: int
    budget: float  # the human-grading budget to draw the sample with (expected number of sampled drafts)
    created_by: int | None = Field(default=None, foreign_key="app_user.id")
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class PpiUntilDecided(SQLModel, table=True):
    """A sampled run set to "grade until decided" (issue 43): its queue closes once every gate criterion is decided, or at the cap."""

    __tablename__: ClassVar[str] = "ppi_until_decided"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", unique=True, index=True)
    cap: int | None = Field(default=None)  # the most final grades the lead allows; None: no cap
    set_by: int | None = Field(default=None, foreign_key="app_user.id")
    set_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    closed_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    closed_reason: str | None = Field(default=None, max_length=200)


class PpiDecision(SQLModel, table=True):
    """One gate criterion's call on a run as the confidence sequence made it: when, on how many grades, and whether re-opened."""

    __tablename__: ClassVar[str] = "ppi_decision"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    criterion: str = Field(max_length=40)
    verdict: str = Field(max_length=10)  # pass | fail
    low: float
    high: float
    grades: int  # the final grades the call rested on
    # the drafts whose final grades those were (ids, ascending); None for a decision stored before migration 0028
    rested_on: list[int] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    decided_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    reopened_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    reopened_by: int | None = Field(default=None, foreign_key="app_user.id")  # who saved the grade that re-opened it
    reopen_reason: str | None = Field(default=None, max_length=300)
