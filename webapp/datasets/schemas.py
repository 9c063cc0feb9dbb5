"""JSON API shapes of datasets."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from webapp.core.public import PublicModel
from webapp.datasets.models import DatasetBase
from webapp.web.api_schemas import Timestamp


class DatasetPublic(DatasetBase, PublicModel):
    """A dataset version: name, version, hash, format, case count, import time."""

    id: int
    imported_at: Timestamp


class DatasetUpload(BaseModel):
    """A dataset file sent by the team's pipeline: its name, its format and its text."""

    name: str = Field(min_length=1, max_length=200, description="The dataset's name (its versions share it)", examples=["support-eval"])
    format: Literal["jsonl", "yaml"] = Field(description="The file's format, as the format guide defines it")
    content: str = Field(description="The file's text (UTF-8), exactly as `draftdesk import dataset FILE` would read it")


class DatasetImportPublic(PublicModel):
    """What importing a dataset did: the version it made or found, and how the file departs from the plan."""

    dataset: DatasetPublic
    created: bool = Field(description="A new version was stored (false: the newest version holds this content already)")
    message: str = Field(description="What `draftdesk import dataset` prints")
    warnings: list[str] = Field(description="How the file departs from the plan's category mix and intents, and golden cases without expectations")
