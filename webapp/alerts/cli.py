"""`draftdesk alerts channels add|list|test|remove` and `draftdesk alerts run-once`."""

from __future__ import annotations

import typer

from webapp.core.cli_support import cli_session, console, fail, load_settings


def register(app: typer.Typer, import_app: typer.Typer) -> None:
    """Add the alerts commands (each imports what it runs when it runs)."""
    alerts_app = typer.Typer(help="Alert notifications: channels, and one evaluation and delivery pass.", no_args_is_help=True)
    channels = typer.Typer(help="Notification channels (Slack, signed webhook, email, file).", no_args_is_help=True)
    alerts_app.add_typer(channels, name="channels")
    app.add_typer(alerts_app, name="alerts")
    channels.command("add")(channels_add)
    channels.command("list")(channels_list)
    channels.command("test")(channels_test)
    channels.command("remove")(channels_remove)
    alerts_app.command("run-once")(run_once)


def channels_add(
    name: str = typer.Option(..., "--name", help="A name for the channel"),
    kind: str = typer.Option(..., "--kind", help="slack | webhook | email | file"),
    url: str = typer.Option("", "--url", help="Webhook URL (slack, webhook)"),
    path: str = typer.Option("", "--path", help="JSON-lines file (file channels, for demos and local checks)"),
    topic: list[str] = typer.Option(["all"], "--topic", help="all, metrics, a metric name, no_data, regression, hallucination, human_quality"),
    send_resolved: bool = typer.Option(True, "--send-resolved/--no-resolved", help="Also send 'resolved' messages"),
    smtp_host: str = typer.Option("", "--smtp-host"),
    smtp_port: int = typer.Option(0, "--smtp-port", help="Default 587 (starttls), 465 (tls), 25 (none)"),
    security: str = typer.Option("starttls", "--security", help="starttls | tls | none"),
    username: str = typer.Option("", "--username", help="SMTP user"),
    password_env: str = typer.Option("", "--password-env", help="Environment variable holding the SMTP password (its name starts with DRAFTDESK_SMTP_)"),
    from_addr: str = typer.Option("", "--from", help="Sender address"),
    to: str = typer.Option("", "--to", help="Recipients, comma-separated"),
    ca_file: str = typer.Option("", "--ca-file", help="CA bundle to verify the SMTP server (default: system CAs)"),
) -> None:
    """Add a notification channel; a webhook channel's signing secret is printed."""
    from webapp.alerts import channels as alerts_channels

    settings = load_settings()
    email: dict[str, object] = {"host": smtp_host, "port": smtp_port or None, "security": security, "username": username,
             "password_env": password_env, "from_addr": from_addr, "to": to, "ca_file": ca_file}
    try:
        with cli_session(settings) as session:
            ch = alerts_channels.add_channel(session=session, name=name, kind=kind, target=url or path, topics=topic,
                                     send_resolved=send_resolved, email=email if kind == "email" else None,
                                     allow_private_targets=settings.alerts_allow_private_targets)
            console.print(f"channel {ch.id} {ch.name} ({ch.kind}) added", highlight=False)
            if ch.kind == "webhook":
                typer.echo(f"signing secret: {alerts_channels.signing_secret(ch, settings.secret_key)}")
    except alerts_channels.AlertsError as exc:
        fail(str(exc))

def channels_list(
    show_secrets: bool = typer.Option(False, "--show-secrets", help="Print webhook signing secrets"),
) -> None:
    """List channels with their topics and their last delivery."""
    from webapp.alerts import channels as alerts_channels
    from webapp.alerts import outbox
    from webapp.alerts.items import email_config
    from webapp.core.db import stored_id

    settings = load_settings()
    with cli_session(settings) as session:
        for ch in alerts_channels.list_channels(session=session):
            last = outbox.last_deliveries(session=session, channel_id=stored_id(ch.id), limit=1)
            cfg = email_config(ch)
            where = ch.target or f"{cfg.get('host')}:{cfg.get('port')} -> {', '.join(cfg.get('to', []))}"
            state = f"last: {outbox.delivery_state(last[0])}" if last else "nothing sent yet"
            # plain tab-separated lines (no wrapping), for people and for scripts
            typer.echo(
                f"{ch.id}\t{ch.name}\t{ch.kind}\t{where}\ttopics={','.join(ch.topics)}\t"
                f"resolved={'yes' if ch.send_resolved else 'no'}\t{state}"
            )
            if show_secrets and ch.kind == "webhook":
                typer.echo(f"\tsigning secret: {alerts_channels.signing_secret(ch, settings.secret_key)}")

def channels_test(channel: str = typer.Argument(..., help="Channel id or name")) -> None:
    """Send a test message to a channel now and report the answer (exit 1 if it failed)."""
    from webapp.alerts import channels as alerts_channels
    from webapp.alerts import delivery

    settings = load_settings()
    try:
        with cli_session(settings) as session:
            ch = alerts_channels.get_channel(session=session, ref=channel)
    except alerts_channels.AlertsError as exc:
        fail(str(exc))
    result = delivery.send_test(ch, base_url=settings.base_url, secret_key=settings.secret_key,
                                allow_private_targets=settings.alerts_allow_private_targets)
    if result.ok:
        console.print(f"test message delivered to {ch.name}" + (f" (HTTP {result.status})" if result.status else ""))
    else:
        fail(f"test message to {ch.name} failed: {result.error}", code=1)

def channels_remove(channel: str = typer.Argument(..., help="Channel id or name")) -> None:
    """Remove a channel and its queued messages."""
    from webapp.alerts import channels as alerts_channels

    try:
        with cli_session() as session:
            ch = alerts_channels.remove_channel(session=session, ref=channel)
            console.print(f"channel {ch.name} removed", highlight=False)
    except alerts_channels.AlertsError as exc:
        fail(str(exc))

def run_once() -> None:
    """Evaluate alerts once (if no other process holds the evaluator lease) and deliver what is due."""
    from webapp.alerts.background import holder_id, run_pass
    from webapp.alerts.outbox import release_lease
    from webapp.core.db import make_engine
    from webapp.core.migrations_runner import upgrade

    settings = load_settings()
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    holder = holder_id()
    try:
        report = run_pass(engine=engine, spec=settings.eval_spec, base_url=settings.base_url,
                          secret_key=settings.secret_key, holder=holder, lease_ttl_s=300,
                          allow_private_targets=settings.alerts_allow_private_targets)
    finally:
        release_lease(engine=engine, holder=holder)  # the next cron run may evaluate at once
        engine.dispose()
    if report.evaluated:
        console.print(f"evaluated: {report.transitions} new transitions, {report.queued} messages queued")
    else:
        console.print("not evaluated: another process holds the evaluator lease")
    d = report.delivery
    console.print(f"delivered: {len(d.sent)} sent, {len(d.retrying)} to retry, {len(d.failed)} given up")
