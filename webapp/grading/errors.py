"""Grading errors; each carries the HTTP status a route answers with."""

from __future__ import annotations


class GradingError(Exception):
    """Base of grading errors; `status` is the HTTP status a route answers with."""

    status = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class GradeInvalid(GradingError):
    """A score or the rationale is not acceptable; `field` names it."""

    status = 422


class AlreadyGraded(GradingError):
    """The grader already graded this draft (revise instead)."""

    status = 409


class NoPlaceLeft(GradingError):
    """The draft already has the graders it needs (grades plus live reservations)."""

    status = 409


class NotGradable(GradingError):
    """The draft is in no grading queue (an escalation, a fallback, or not drawn in its run's sample)."""

    status = 409


class GradeLocked(GradingError):
    """The grade cannot change now: the draft was adjudicated, or its disagreement waits for the lead."""

    status = 409


class GradesHidden(GradingError):
    """Blind grading: the caller may not see other grades of this draft yet."""

    status = 403


class NotAllowed(GradingError):
    """The caller may not do this (e.g. revise another grader's grade)."""

    status = 403


class AlreadyApproved(GradingError):
    """The reference version is already approved (its first approver and time stay)."""

    status = 409


class NotFound(GradingError):
    """No such draft, grade, adjudication or reference."""

    status = 404
