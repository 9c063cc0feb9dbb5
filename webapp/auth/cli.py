"""`draftdesk users ...` and `draftdesk tokens ...`."""

from __future__ import annotations

import typer

from webapp.core.cli_support import cli_session, console, fail, read_password_from_stdin_or_prompt


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the users and tokens commands."""
    users = typer.Typer(help="Users and their roles.", no_args_is_help=True)
    tokens = typer.Typer(help="API tokens (stored hashed; shown once).", no_args_is_help=True)
    app.add_typer(users, name="users")
    app.add_typer(tokens, name="tokens")
    _register_users(users)
    _register_tokens(tokens)


def _register_users(users: typer.Typer) -> None:
    """Add `users create` and `users list`."""

    @users.command("create")
    def users_create(
        email: str = typer.Option(..., "--email", help="Sign-in email"),
        role: list[str] = typer.Option(..., "--role", help="labeler, lead, pm, support_lead, ml_lead or admin; repeat for several"),
        name: str = typer.Option("", "--name", help="Display name"),
    ) -> None:
        """Create a user; the password is prompted for, or read from standard input when piped."""
        from webapp.auth import service  # loaded by the command, not by `draftdesk --help`

        password = read_password_from_stdin_or_prompt()
        try:
            with cli_session() as session:
                user = service.create_user(session=session, email=email, password=password, roles=role, name=name)
        except service.AuthError as exc:
            fail(str(exc))
        # Printed after the commit: a reader that stops early cannot undo the work.
        console.print(f"created {user.email} with roles {', '.join(sorted(role))}")

    @users.command("list")
    def users_list() -> None:
        """List users and their roles."""
        from webapp.auth import service  # loaded by the command, not by `draftdesk --help`

        with cli_session() as session:
            rows = service.list_users(session=session)
        for user, roles in rows:
            console.print(f"{user.email}\t{' '.join(sorted(roles))}\t{'active' if user.is_active else 'inactive'}")


def _register_tokens(tokens: typer.Typer) -> None:
    """Add `tokens create`, `tokens revoke` and `tokens list`."""

    @tokens.command("create")
    def tokens_create(
        email: str = typer.Option(..., "--email", help="Owner of the token"),
        name: str = typer.Option(..., "--name", help="What the token is for"),
        scope: list[str] = typer.Option(None, "--scope", help="ingest, metrics, ci (the team's pipeline), or a role the owner holds; default: the owner's roles"),
    ) -> None:
        """Create an API token and print it once."""
        from webapp.auth import service  # loaded by the command, not by `draftdesk --help`

        try:
            with cli_session() as session:
                user = service.get_user_by_email(session=session, email=email)
                if user is None:
                    fail(f"email: no user {email}")
                row, plain = service.create_token(session=session, user=user, name=name, scopes=scope or None)
        except service.AuthError as exc:
            fail(str(exc))
        # Shown once the token is stored: a token printed but rolled back would be useless.
        console.print(f"token {row.id} ({row.scopes}) for {user.email}; it is shown only now:")
        print(plain)

    @tokens.command("revoke")
    def tokens_revoke(token_id: int = typer.Argument(..., help="Token id from `tokens list`")) -> None:
        """Revoke an API token."""
        from webapp.auth import service  # loaded by the command, not by `draftdesk --help`

        try:
            with cli_session() as session:
                service.revoke_token(session=session, token_id=token_id)
        except service.AuthError as exc:
            fail(str(exc))
        console.print(f"token {token_id} revoked")

    @tokens.command("list")
    def tokens_list() -> None:
        """List API tokens (prefixes only)."""
        from webapp.auth import service  # loaded by the command, not by `draftdesk --help`

        with cli_session() as session:
            rows = service.list_tokens(session=session)
        for tok, user in rows:
            state = "revoked" if tok.revoked_at else "active"
            console.print(f"{tok.id}\t{tok.prefix}…\t{tok.name}\t{user.email}\t{tok.scopes}\t{state}")
