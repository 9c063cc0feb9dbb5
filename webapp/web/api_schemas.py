"""Response shapes shared by every domain's JSON API: the error body and the timestamp convention."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field

from webapp.core.timeutil import as_utc


def _utc_text(value: object) -> object:
    """A datetime as ISO 8601 text in UTC with its offset (a naive one, as SQLite returns it, is UTC); text as it is."""
    return as_utc(value).isoformat() if isinstance(value, dt.datetime) else value


def _stored_text(value: object) -> object:
    """A datetime as ISO 8601 text as the database returned it (no offset on SQLite); text as it is."""
    return value.isoformat() if isinstance(value, dt.datetime) else value


def _day_text(value: object) -> object:
    """A date as ISO 8601 text (YYYY-MM-DD); text as it is."""
    return value.isoformat() if isinstance(value, dt.date) and not isinstance(value, dt.datetime) else value


# Timestamps are ISO 8601 text: typed as text so the answer's bytes stay what clients already parse, and
# given as the row's datetime (webapp.core.public.PublicModel.of reads it) or as text.
Timestamp = Annotated[str, BeforeValidator(_utc_text), Field(description="ISO 8601 timestamp")]
# The answers that have always given the stored value as it came back: UTC with its offset on PostgreSQL,
# naive UTC on SQLite (the same instant; kept so those answers' bytes do not change).
StoredTimestamp = Annotated[str, BeforeValidator(_stored_text), Field(description="ISO 8601 timestamp")]
Day = Annotated[str, BeforeValidator(_day_text), Field(description="ISO 8601 date (YYYY-MM-DD)")]


class FieldError(BaseModel):
    """One problem with a request: the field (or `(body)`) and what is wrong with it."""

    field: str
    message: str


class RecordFieldError(FieldError):
    """One bad record of a batch (POST /runs/{run}/drafts): FastAPI's validation shape, with `field` and `message` too.

    `loc` is `["body", index, field]` (index 0-based); `msg` is the import's message, `message` the same.
    """

    loc: list[str | int]
    msg: str
    type: str


class ErrorPublic(BaseModel):
    """Every 4xx answer of the API: a message, or one {field, message} object per problem."""

    detail: str | list[RecordFieldError] | list[FieldError]
    errors_total: int | None = Field(
        default=None, description="A refused batch: how many bad records it holds (at most 20 are listed in detail)"
    )
