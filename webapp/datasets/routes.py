"""JSON API: imported datasets."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.core.timeutil import as_utc
from webapp.datasets import service
from webapp.datasets.pages import DATASET_ROLES
from webapp.datasets.schemas import DatasetPublic
from webapp.web.deps import require_role

router = APIRouter(tags=["datasets"])


@router.get("/datasets", response_model=list[DatasetPublic])
def api_datasets(
    session: SessionDep, principal: Principal = Depends(require_role(*DATASET_ROLES))
) -> list[dict[str, Any]]:
    """List every dataset version: name, version, hash, format, case count, import time."""
    return [
        {
            "id": d.id,
            "name": d.name,
            "version": d.version,
            "sha256": d.sha256,
            "format": d.format,
            "count": d.count,
            "imported_at": as_utc(d.imported_at).isoformat(),
        }
        for d in service.list_datasets(session=session)
    ]
