"""JSON API shapes of datasets."""

from __future__ import annotations

from webapp.core.db import stored_id
from webapp.core.timeutil import as_utc
from webapp.datasets.models import Dataset, DatasetBase
from webapp.web.api_schemas import Timestamp


class DatasetPublic(DatasetBase):
    """A dataset version: name, version, hash, format, case count, import time."""

    id: int
    imported_at: Timestamp


def dataset_public(d: Dataset) -> DatasetPublic:
    """Return a dataset version as the JSON API shows it (import time in UTC, ISO 8601)."""
    return DatasetPublic(
        id=stored_id(d.id),
        name=d.name,
        version=d.version,
        sha256=d.sha256,
        format=d.format,
        count=d.count,
        imported_at=as_utc(d.imported_at).isoformat(),
    )
