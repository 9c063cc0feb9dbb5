"""JSON API: KB articles with their revisions, and the KB sync the team's pipeline calls (issue 40).

The sync's writes need a `ci` token or an admin (decision: the KB is the help center's, kept in step by
the pipeline or by whoever runs Draft Desk; no other role writes it). Every write only appends
revisions (webapp/kb/sync.py) and is idempotent, so a CI job may retry it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Response
from fastapi.responses import JSONResponse
from pydantic import JsonValue

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.kb import sync
from webapp.kb.schemas import (
    ArticlePublic,
    KbArticleSyncPublic,
    KbSyncIn,
    KbSyncPublic,
    articles_public,
)
from webapp.web.api_docs import error_response
from webapp.web.api_schemas import ErrorPublic, RecordFieldError
from webapp.web.deps import ANY_ROLE, CI_SCOPE, require_role, require_scope
from webapp.web.request_limits import MB

router = APIRouter(tags=["kb"])

KB_SYNC_BODY_LIMIT = 20 * MB  # a whole help-center export in one request (all-or-nothing)
_INVALID = error_response(
    "Bad records: `detail` names up to 20 as {loc: [body, ..., index, field], msg, type}; `errors_total` counts them all; nothing stored"
)


KB_WRITER = require_scope(CI_SCOPE, "admin")  # a `ci` token or an admin: the KB sync's writes


def _refused(exc: sync.KbSyncInvalid, where: list[str | int], files: list[str] | None = None) -> JSONResponse:
    """Answer 422 naming each bad record's place (`loc`) and field, at most MAX_LISTED of them."""
    detail = []
    for p in exc.problems[: sync.MAX_LISTED]:
        if p.source and files is not None:
            loc: list[str | int] = ["body", "files", files.index(p.source), "content"]
            msg = f"{p.source}:{p.line}: {p.message}" if p.line and not p.message.startswith(p.source) else p.message
        else:
            loc, msg = [*where, *([p.index] if files is not None else []), p.field], p.message
        field = ".".join(str(x) for x in loc[1:])
        detail.append(RecordFieldError(loc=loc, msg=msg, type=p.kind, field=field, message=msg))
    return JSONResponse(ErrorPublic(detail=detail, errors_total=len(exc.problems)).model_dump(), status_code=422)


@router.get(
    "/kb/articles",
    summary="List the KB articles",
    description=(
        "Anyone on the team lists the help-center articles the checks cite against: each article's state "
        "and every revision's number, title, status and effective date."
    ),
    response_model=list[ArticlePublic],
)
def api_kb_articles(
    session: SessionDep, q: str = "", principal: Principal = Depends(require_role(*ANY_ROLE))
) -> list[ArticlePublic]:
    """List KB articles with their state and every revision's number, title, status and effective date."""
    return articles_public(session=session, q=q)


@router.put(
    "/kb/articles/{article_id}",
    response_model=KbArticleSyncPublic,
    summary="Create an article or add a revision (the pipeline's KB sync)",
    description=(
        "The team's CI (or an admin) calls this when the help center publishes, edits or deprecates an article. "
        "The body is the revision's text: a new article answers 201; a text that differs from the article's newest "
        "revision is stored as a new revision (200, `revised`, or `deprecated` with `status: deprecated`, where title "
        "and body may be left out); the same text again changes nothing (200, `unchanged`), so a retry is safe. "
        "A stored revision never changes. Needs a `ci` token or an admin."
    ),
    responses={201: {"model": KbArticleSyncPublic, "description": "The article was new: created with this revision"}, 422: _INVALID},
)
def api_kb_put_article(
    article_id: str,
    session: SessionDep,
    response: Response,
    revision: Annotated[dict[str, JsonValue], Body(description="The revision: title, body, and optionally revision, status, effective_date, intent")],
    principal: Principal = Depends(KB_WRITER),
) -> KbArticleSyncPublic | JSONResponse:
    """Store a revision's text for an article: create it, add a revision, or change nothing."""
    if revision.get("article_id", article_id) != article_id:
        exc = sync.KbSyncInvalid([sync.RecordProblem(0, "article_id", f"article_id: {revision['article_id']!r} is not the path's {article_id!r}")])
        return _refused(exc, ["body"])
    try:
        records = sync.parse_requests([{**revision, "article_id": article_id}])
        result = sync.apply_records(session=session, records=records)
    except sync.KbSyncInvalid as exc:
        return _refused(exc, ["body"])
    done = result.articles[0]
    response.status_code = 201 if done.outcome == "created" else 200
    return KbArticleSyncPublic(**KbSyncPublic.of(result).articles[0].model_dump(), notes=result.notes)


@router.delete(
    "/kb/articles/{article_id}",
    response_model=KbArticleSyncPublic,
    summary="Delete an article (a new revision with status deleted)",
    description=(
        "The team's CI (or an admin) calls this when the help center removes an article: a new revision with status "
        "`deleted` keeps the newest text, and drafts citing the article then fail `Citations current`. An article "
        "already deleted answers `unchanged`. Needs a `ci` token or an admin."
    ),
    responses={404: error_response("No article with that id")},
)
def api_kb_delete_article(article_id: str, session: SessionDep, principal: Principal = Depends(KB_WRITER)) -> KbArticleSyncPublic:
    """Delete an article by adding a revision with status deleted."""
    done = sync.delete_article(session=session, article_id=article_id)
    return KbArticleSyncPublic.model_validate({**vars(done), "notes": []})


@router.post(
    "/kb/sync",
    response_model=KbSyncPublic,
    max_body_size=KB_SYNC_BODY_LIMIT,
    summary="Sync the whole KB from a help-center export (the pipeline)",
    description=(
        "The team's CI (`draftdesk remote kb-sync`) or an admin sends a whole help-center export in one transaction: "
        "`articles` (revision objects) and/or `files` (in the `draftdesk import kb` format: JSONL, YAML or JSON). "
        "The answer counts the articles created, revised, unchanged, deprecated and deleted; with `delete_missing`, "
        "every article the export leaves out is deleted (a new revision). Any bad record refuses the whole export "
        "(422, each bad record's index or file line and field), nothing stored. Needs a `ci` token or an admin."
    ),
    responses={422: _INVALID},
)
def api_kb_sync(body: KbSyncIn, session: SessionDep, principal: Principal = Depends(KB_WRITER)) -> KbSyncPublic | JSONResponse:
    """Apply a whole help-center export in one transaction."""
    names = [f.name for f in body.files]
    try:
        if not body.articles and not body.files:
            raise sync.KbSyncInvalid([sync.RecordProblem(0, "articles", "the export holds no KB revisions (give articles or files)", "missing")])
        records = sync.parse_requests(body.articles)
        records += sync.files_records([(f.name, f.content.encode()) for f in body.files], offset=len(records))
        result = sync.apply_records(session=session, records=records, delete_missing=body.delete_missing)
    except sync.KbSyncInvalid as exc:
        return _refused(exc, ["body", "articles"], names)
    return KbSyncPublic.of(result)
