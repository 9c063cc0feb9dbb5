"""JSON API shapes of datasets."""

from __future__ import annotations

from webapp.api_schemas import Timestamp
from webapp.datasets.models import DatasetBase


class DatasetPublic(DatasetBase):
    """A dataset version: name, version, hash, format, case count, import time."""

    id: int
    imported_at: Timestamp
