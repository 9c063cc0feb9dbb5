"""Response shapes shared by every domain's JSON API: the error body and the timestamp convention."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

# Timestamps are ISO 8601 text exactly as the service formats them (UTC with an offset, except where a
# domain stores naive UTC): typed as text so the answer's bytes stay what clients already parse.
Timestamp = Annotated[str, Field(description="ISO 8601 timestamp")]
Day = Annotated[str, Field(description="ISO 8601 date (YYYY-MM-DD)")]


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
