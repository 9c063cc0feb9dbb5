"""JSON API: imported datasets."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.datasets import service
from webapp.datasets.pages import DATASET_ROLES
from webapp.datasets.schemas import DatasetPublic, dataset_public
from webapp.web.deps import require_role

router = APIRouter(tags=["datasets"])


@router.get("/datasets", response_model=list[DatasetPublic])
def api_datasets(session: SessionDep, principal: Principal = Depends(require_role(*DATASET_ROLES))) -> list[DatasetPublic]:
    """List every dataset version: name, version, hash, format, case count, import time."""
    return [dataset_public(d) for d in service.list_datasets(session=session)]
