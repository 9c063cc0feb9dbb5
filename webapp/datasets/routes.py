"""JSON API: imported datasets, and the team's pipeline sending one (issue 40)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Response

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.datasets import service
from webapp.datasets.pages import DATASET_ROLES
from webapp.datasets.records import RecordError
from webapp.datasets.schemas import DatasetImportPublic, DatasetPublic, DatasetUpload
from webapp.web.api_docs import error_response
from webapp.web.deps import SpecDep, require_pipeline, require_role
from webapp.web.request_limits import UPLOAD_BODY_LIMIT

router = APIRouter(tags=["datasets"])


@router.get(
    "/datasets",
    response_model=list[DatasetPublic],
    summary="List the datasets",
    description=(
        "Leads, labelers, the PM and the admin list every dataset version (name, version, hash, format, "
        "case count, import time), e.g. to name the one a run drafted over."
    ),
)
def api_datasets(session: SessionDep, principal: Principal = Depends(require_role(*DATASET_ROLES))) -> list[DatasetPublic]:
    """List every dataset version: name, version, hash, format, case count, import time."""
    return [DatasetPublic.of(d) for d in service.list_datasets(session=session)]


@router.post(
    "/datasets",
    status_code=201,
    max_body_size=UPLOAD_BODY_LIMIT,
    summary="Import a dataset file (the pipeline)",
    description=(
        "The team's CI sends the eval dataset its run drafts over, before creating the run. The loader of "
        "`draftdesk import dataset` checks it (all or nothing, the same messages); the same content again "
        "imports nothing (200), other content is the name's next version (201). Needs a `ci` token, or an "
        "ML lead or admin."
    ),
    responses={
        200: {"model": DatasetImportPublic, "description": "The newest version of that name holds this content already: nothing imported"},
        422: error_response("A bad record or file: the format guide's message with its line, as `draftdesk import dataset` says it"),
    },
)
def api_import_dataset(
    body: DatasetUpload, session: SessionDep, spec: SpecDep, response: Response, principal: Principal = Depends(require_pipeline())
) -> DatasetImportPublic:
    """Import a dataset file sent by the team's pipeline, or find the version holding it."""
    try:
        result = service.import_dataset_once(
            session=session, data=body.content.encode(), path=f"{body.name}.{body.format}", name=body.name, spec=spec
        )
    except RecordError as exc:
        raise HTTPException(status_code=422, detail=exc.location) from None
    response.status_code = 201 if result.created else 200
    return DatasetImportPublic.of(result)
