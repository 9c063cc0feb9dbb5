"""Every service error becomes its 4xx on every route, even where a route forgets to map it.

Routes map the errors they expect (with a field name where they know it); these handlers are the
net under them: a domain's "not found" is 404, a domain's "cannot do that with this input" is
422 (grading errors carry their own status), and a number too large for the database's integer
columns is 422 instead of a driver error. Pages get the error page, the API `{"detail": ...}`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DataError

# (module, class name, status): service errors by domain. A LookupError means "no such thing".
SERVICE_ERRORS: tuple[tuple[str, str, int | None], ...] = (
    ("webapp.datasets.records", "RecordError", 422),
    ("webapp.datasets.service", "DatasetNotFound", 404),
    ("webapp.kb.service", "KbNotFound", 404),
    ("webapp.runs.service", "RunNotFound", 404),
    ("webapp.runs.service", "DraftNotFound", 404),
    ("webapp.checks.service", "DraftNotFound", 404),
    ("webapp.metrics.service", "MetricsError", 422),
    ("webapp.regression.service", "RegressionError", 422),
    ("webapp.regression.service", "NotComparable", 422),
    ("webapp.reviews.service", "ReviewError", 422),
    ("webapp.gates.service", "GateError", 422),
    ("webapp.survey.service", "SurveyError", 422),
    ("webapp.evaluator.service", "EvaluatorRunNotFound", 404),
    ("webapp.auth.service", "AuthError", 422),
    ("webapp.safe_input", "InputLimitError", 422),
    ("webapp.grading.errors", "GradingError", None),  # each grading error carries its status
)
OUT_OF_RANGE = "a number in the request is out of range for the database"


def _respond(request: Request, status: int, detail: str) -> Response:
    from webapp.templating import templates

    if request.url.path.startswith("/api/"):
        return JSONResponse({"detail": detail}, status_code=status)
    return templates.TemplateResponse(
        request, "error.html", {"status_code": status, "detail": detail}, status_code=status
    )


def _handler(status: int | None) -> Callable[[Request, Exception], Response]:
    def handle(request: Request, exc: Exception) -> Response:
        code = status if status is not None else int(getattr(exc, "status", 400))
        return _respond(request, code, str(getattr(exc, "message", None) or exc))

    return handle


def install(app: FastAPI) -> None:
    """Register the service-error handlers on the app."""
    for module, name, status in SERVICE_ERRORS:
        app.add_exception_handler(getattr(importlib.import_module(module), name), _handler(status))
    out_of_range = _handler(422)
    app.add_exception_handler(OverflowError, lambda request, exc: out_of_range(request, ValueError(OUT_OF_RANGE)))
    app.add_exception_handler(DataError, lambda request, exc: out_of_range(request, ValueError(OUT_OF_RANGE)))
