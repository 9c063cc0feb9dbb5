"""The admin pages' view models: overview, users, tokens, a new token, imports and their outcomes."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlmodel import Session

from webapp.admin import service
from webapp.auth import service as auth_service
from webapp.auth.models import EXTRA_SCOPES, ROLES, ApiToken, User
from webapp.datasets import service as datasets_service
from webapp.datasets.models import Dataset
from webapp.datasets.records import RecordError
from webapp.runs import service as runs_service
from webapp.runs.service import RunRow


@dataclass(frozen=True)
class AdminHomeView:
    """/admin: what the admin looks after, counted."""

    overview: service.AdminOverview


@dataclass(frozen=True)
class UserForm:
    """What the create-user form shows again after a refused submission."""

    email: str = ""
    name: str = ""
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class UsersView:
    """/admin/users: users with their roles, and the create-user form."""

    users: list[tuple[User, frozenset[str]]]
    error: str | None
    form: UserForm
    flash: str | None
    sources: service.RoleSources
    waiting: list[User]  # active accounts without any role: first sign-ins through the provider, waiting for one
    roles: tuple[str, ...] = ROLES


def users_view(*, session: Session, error: str | None = None, form: UserForm | None = None, flash: str | None = None) -> UsersView:
    """Build the users page."""
    users = auth_service.list_users(session=session)
    return UsersView(
        users=users, error=error, form=form or UserForm(), flash=flash, sources=service.role_sources(session=session),
        waiting=[u for u, roles in users if u.is_active and not roles],
    )  # fmt: skip


@dataclass(frozen=True)
class TokenForm:
    """What the create-token form shows again after a refused submission."""

    email: str = ""
    name: str = ""
    scopes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TokensView:
    """/admin/tokens: API tokens by prefix with owner and creator, and the create-token form."""

    tokens: list[service.TokenRow]
    users: list[tuple[User, frozenset[str]]]
    error: str | None
    form: TokenForm
    flash: str | None
    scopes: tuple[str, ...] = ROLES + EXTRA_SCOPES


def tokens_view(*, session: Session, error: str | None = None, form: TokenForm | None = None, flash: str | None = None) -> TokensView:
    """Build the tokens page."""
    return TokensView(
        tokens=service.token_rows(session=session),
        users=auth_service.list_users(session=session),
        error=error,
        form=form or TokenForm(),
        flash=flash,
    )


@dataclass(frozen=True)
class TokenCreatedView:
    """/admin/tokens/{id}/created: a new token's plain text, once (None: already revealed)."""

    token: ApiToken
    plain: str | None
    owner: User


@dataclass(frozen=True)
class ImportsView:
    """/admin/imports: the upload forms, with the datasets and runs a drafts file may name."""

    datasets: list[Dataset]
    runs: list[RunRow]


def imports_view(*, session: Session) -> ImportsView:
    """Build the imports page."""
    return ImportsView(datasets=datasets_service.list_datasets(session=session), runs=runs_service.list_runs(session=session))


@dataclass(frozen=True)
class ImportErrorView:
    """A refused import: nothing of the file is kept; the error names the file and line when known."""

    kind: str
    error: RecordError
    location: str


@dataclass(frozen=True)
class ImportDoneView:
    """An import's outcome, with a link to what it made and any warnings."""

    kind: str
    message: str
    link: str | None
    created: bool = True
    warnings: list[str] = field(default_factory=list)
