"""Every service error becomes its 4xx on every route, even where a route forgets to map it.

Routes map the errors they expect (with a field name where they know it); these handlers are the
net under them: a domain's "not found" is 404, a domain's "cannot do that with this input" is
422 (grading errors carry their own status), and a number too large for the database's integer
columns is 422 instead of a driver error. Pages get the error page, the API `{"detail": ...}`.

A database that does not answer (PostgreSQL down or unreachable, the pool exhausted, SQLite's file
locked past its busy timeout: the DB-API's OperationalError and InterfaceError, SQLAlchemy's pool
TimeoutError) is 503 with `Retry-After`, on the error page or as JSON (issue 41): the request may
succeed if repeated, which a bare 500 does not tell a client or a load balancer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DataError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from webapp.auth import service as auth_service
from webapp.core.safe_input import InputLimitError
from webapp.datasets import records
from webapp.datasets import service as datasets_service
from webapp.evaluator import service as evaluator_service
from webapp.gates import service as gates_service
from webapp.grading import errors as grading_errors
from webapp.kb import service as kb_service
from webapp.metrics import daily as metrics_daily
from webapp.regression import service as regression_service
from webapp.reviews import service as reviews_service
from webapp.runs import pipeline as runs_pipeline
from webapp.runs import service as runs_service
from webapp.survey import service as survey_service
from webapp.web.api_schemas import ErrorPublic, RecordFieldError

# (error class, status): service errors by domain. A LookupError means "no such thing". The app
# (main) installs these, so this module sits at the top with it and imports each domain plainly.
SERVICE_ERRORS: tuple[tuple[type[Exception], int | None], ...] = (
    (records.RecordError, 422),
    (datasets_service.DatasetNotFound, 404),
    (kb_service.KbNotFound, 404),
    (runs_service.RunNotFound, 404),
    (runs_service.DraftNotFound, 404),
    (metrics_daily.MetricsError, 422),
    (regression_service.RegressionError, 422),
    (regression_service.NotComparable, 422),
    (reviews_service.SampleAlreadyDrawn, 409),
    (reviews_service.ReviewError, 422),
    (gates_service.GateError, 422),
    (survey_service.SurveyError, 422),
    (evaluator_service.EvaluatorRunNotFound, 404),
    (auth_service.AuthError, 422),
    (InputLimitError, 422),
    (grading_errors.GradingError, None),  # each grading error carries its status
)
OUT_OF_RANGE = "a number in the request is out of range for the database"
UNAVAILABLE = "The database is not answering just now; nothing was changed by this request. Try again in a few seconds."
# Seconds a client is asked to wait before repeating a request the database could not serve.
RETRY_AFTER_S = 5
log = logging.getLogger(__name__)


def _respond(request: Request, status: int, detail: str, headers: dict[str, str] | None = None) -> Response:
    from webapp.web.templating import templates

    if request.url.path.startswith("/api/"):
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)
    return templates.TemplateResponse(
        request, "error.html", {"status_code": status, "detail": detail}, status_code=status, headers=headers
    )


def database_unavailable(request: Request, exc: Exception) -> Response:
    """Answer 503 with Retry-After for a request the database could not serve (down, unreachable, busy)."""
    log.warning("database unavailable for %s %s: %s", request.method, request.url.path, exc.__class__.__name__)
    return _respond(request, 503, UNAVAILABLE, headers={"Retry-After": str(RETRY_AFTER_S)})


def _handler(status: int | None) -> Callable[[Request, Exception], Response]:
    def handle(request: Request, exc: Exception) -> Response:
        code = status if status is not None else int(getattr(exc, "status", 400))
        return _respond(request, code, str(getattr(exc, "message", None) or exc))

    return handle


def _bad_batch(request: Request, exc: Exception) -> Response:
    """Answer a refused batch of drafts: each bad record (at most 20) in FastAPI's shape, and how many there are."""
    assert isinstance(exc, runs_pipeline.DraftBatchInvalid)
    detail = [
        RecordFieldError(
            loc=["body", e.index, e.field], msg=e.message, type=e.kind, field=f"{e.index}.{e.field}", message=e.message
        )
        for e in exc.errors
    ]
    return JSONResponse(ErrorPublic(detail=detail, errors_total=exc.total).model_dump(), status_code=422)


def install(app: FastAPI) -> None:
    """Register the service-error handlers on the app."""
    app.add_exception_handler(runs_pipeline.DraftBatchInvalid, _bad_batch)
    for error, status in SERVICE_ERRORS:
        app.add_exception_handler(error, _handler(status))
    out_of_range = _handler(422)
    app.add_exception_handler(OverflowError, lambda request, exc: out_of_range(request, ValueError(OUT_OF_RANGE)))
    app.add_exception_handler(DataError, lambda request, exc: out_of_range(request, ValueError(OUT_OF_RANGE)))
    for unavailable in (OperationalError, InterfaceError, PoolTimeoutError):
        app.add_exception_handler(unavailable, database_unavailable)
