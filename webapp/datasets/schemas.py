"""JSON API shapes of datasets."""

from __future__ import annotations

from webapp.datasets.models import DatasetBase
from webapp.web.api_schemas import Timestamp


class DatasetPublic(DatasetBase):
    """A dataset version: name, version, hash, format, case count, import time."""

    id: int
    imported_at: Timestamp
