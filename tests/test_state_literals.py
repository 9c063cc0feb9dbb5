"""Every stored state, status and kind is one of its Literal's values, and the API documents them as enums.

Each column below is annotated with a `Literal` alias defined next to the code that writes it; the public
models answer with the same alias. The demo database (SQLite and PostgreSQL) holds only values of it.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest
from sqlalchemy import select
from sqlmodel import Session

from webapp.alerts.models import (
    AlertChannel,
    AlertNotice,
    AlertOutbox,
    ChannelKind,
    NoticeKind,
    NoticeState,
    OutboxStatus,
)
from webapp.alerts.outbox import DeliveryState
from webapp.checks.models import DraftCheck
from webapp.checks.types import CheckStatus, RegressionAlertKind
from webapp.evaluator.artifact_models import CaseStatus, RunStatus, SampleStatus
from webapp.evaluator.models import EvaluatorCaseMetric, EvaluatorJudgeScore, EvaluatorRun
from webapp.kb.models import KbRevision, RevisionStatus
from webapp.metrics.models import HallucinationDecision, HallucinationReport, HallucinationStatus
from webapp.regression.models import RegressionAlert
from webapp.survey.models import Helpful, SurveyAnswer

COLUMNS: list[tuple[Any, Any]] = [
    (DraftCheck.status, CheckStatus),
    (KbRevision.status, RevisionStatus),
    (HallucinationReport.status, HallucinationStatus),
    (HallucinationDecision.decision, HallucinationStatus),
    (AlertChannel.kind, ChannelKind),
    (AlertNotice.kind, NoticeKind),
    (AlertNotice.state, NoticeState),
    (AlertOutbox.status, OutboxStatus),
    (EvaluatorRun.status, RunStatus),
    (EvaluatorCaseMetric.case_status, CaseStatus),
    (EvaluatorJudgeScore.sample_status, SampleStatus),
    (RegressionAlert.kind, RegressionAlertKind),
    (SurveyAnswer.helpful, Helpful),
]
# The columns the demo fills (the others may be empty in it; their values are still checked when present).
DEMO_FILLS = {"draft_check.status", "kb_revision.status", "hallucination_report.status", "alert_channel.kind", "regression_alert.kind"}


@pytest.fixture
def db_url(demo_db_url: str) -> str:
    """Every test here starts from the seeded demo (a copy of the session's template)."""
    return demo_db_url


def _name(column: Any) -> str:
    return f"{column.table.name}.{column.name}"


def test_every_stored_state_is_a_value_of_its_literal(session: Session) -> None:
    seen: dict[str, set[str]] = {}
    for column, literal in COLUMNS:
        values = set(session.execute(select(column).distinct()).scalars())
        seen[_name(column)] = values
        assert values <= set(get_args(literal)), f"{_name(column)} holds {sorted(values - set(get_args(literal)))}"
    assert not [name for name in DEMO_FILLS if not seen[name]], "the demo fills these columns"


def test_the_answer_models_use_the_columns_literals() -> None:
    from webapp.alerts.schemas import ChannelPublic, DeliveryPublic
    from webapp.checks.schemas import CheckResultPublic, NewAlert
    from webapp.evaluator.schemas import EvaluatorRunRef, JudgeScorePublic
    from webapp.kb.schemas import ArticlePublic, RevisionPublic
    from webapp.metrics.schemas import HallucinationReportPublic
    from webapp.survey.schemas import SurveyAnswerPublic

    expected = [
        (CheckResultPublic, "status", CheckStatus),
        (NewAlert, "kind", RegressionAlertKind),
        (RevisionPublic, "status", RevisionStatus),
        (ArticlePublic, "status", RevisionStatus),
        (HallucinationReportPublic, "status", HallucinationStatus),
        (ChannelPublic, "kind", ChannelKind),
        (DeliveryPublic, "state", DeliveryState),
        (EvaluatorRunRef, "status", RunStatus),
        (JudgeScorePublic, "status", SampleStatus),
        (SurveyAnswerPublic, "helpful", Helpful),
    ]
    for model, field, literal in expected:
        assert model.model_fields[field].annotation == literal, f"{model.__name__}.{field}"


def test_the_openapi_document_gives_the_states_as_enums(app: Any) -> None:
    schemas = app.openapi()["components"]["schemas"]
    assert schemas["CheckResultPublic"]["properties"]["status"]["enum"] == list(get_args(CheckStatus))
    assert schemas["RevisionPublic"]["properties"]["status"]["enum"] == list(get_args(RevisionStatus))
    assert schemas["HallucinationReportPublic"]["properties"]["status"]["enum"] == list(get_args(HallucinationStatus))
    assert schemas["DeliveryPublic"]["properties"]["state"]["enum"] == list(get_args(DeliveryState))
    assert schemas["ChannelPublic"]["properties"]["kind"]["enum"] == list(get_args(ChannelKind))
    assert schemas["NewAlert"]["properties"]["kind"]["enum"] == list(get_args(RegressionAlertKind))


def test_the_channels_answer_keeps_its_fields_and_timestamps(api_as: Any, session: Session) -> None:
    """ChannelPublic/DeliveryPublic, now read from the rows: the same keys, and timestamps as the rows' isoformat()."""
    answer = api_as("admin").get("/api/v1/alerts/channels").json()
    assert answer, "the demo has a channel"
    stored = {m.id: m for m in session.execute(select(AlertOutbox)).scalars()}
    for ch in answer:
        assert set(ch) == {"id", "name", "kind", "target", "topics", "send_resolved", "deliveries"}
        for d in ch["deliveries"]:
            assert set(d) == {"id", "state", "attempts", "created_at", "next_attempt_at", "sent_at", "last_status", "last_error", "items"}
            row = stored[d["id"]]
            assert d["created_at"] == row.created_at.isoformat()
            assert d["sent_at"] == (row.sent_at.isoformat() if row.sent_at else None)
