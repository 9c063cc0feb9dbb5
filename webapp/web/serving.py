"""How `draftdesk serve` runs the app: plain uvicorn, with the options a deployment behind a proxy needs.

Decision (issue #26): no process supervisor of our own. The team is 2-8 people and a production
assistant posting under one event per second on average, which one uvicorn process serves; for
more, `--workers N` is passed to uvicorn's own `workers=` (uvicorn starts and restarts them).
gunicorn is not a dependency, so it is not the documented way; uvicorn alone is enough.

Behind a TLS reverse proxy the client's address is in `X-Forwarded-For`: uvicorn's proxy-headers
support reads it only from the addresses in `forwarded_allow_ips` (DRAFTDESK_FORWARDED_ALLOW_IPS),
so the sign-in limiter counts each client's failures under its own address instead of one shared
bucket for the proxy. A client connecting directly cannot forge the header: its address is not in
the list. The default is empty (issue #33): no proxy is trusted until the operator names it, since
trusting 127.0.0.1 by default let anything on the host (or a misrouted port) choose its address.
"""

from __future__ import annotations

from typing import TypedDict

from starlette.types import ASGIApp

APP = "webapp.app.warmup:create_warm_app"  # each worker builds and warms its app (webapp/app/warmup.py)


class UvicornOptions(TypedDict, total=False):
    """The keyword arguments of `uvicorn.run` that `serve` sets."""

    host: str
    port: int
    proxy_headers: bool
    forwarded_allow_ips: str
    access_log: bool
    log_config: dict[str, object] | None
    log_level: str
    workers: int


def uvicorn_options(
    *, host: str, port: int, forwarded_allow_ips: str, workers: int = 1, log_config: dict[str, object] | None = None
) -> UvicornOptions:
    """Return the keyword arguments `uvicorn.run` / `uvicorn.Config` get from `serve`."""
    options: UvicornOptions = {
        "host": host,
        "port": port,
        # nothing to trust: uvicorn's proxy middleware is left out (an empty list would also trust no one)
        "proxy_headers": bool(forwarded_allow_ips.strip()),
        "forwarded_allow_ips": forwarded_allow_ips,
        # One JSON line per request comes from webapp.ops.logs.RequestLog, not uvicorn's text access log;
        # log_config (webapp.ops.logs.logging_config) is applied by uvicorn in each worker process.
        "access_log": False,
        "log_config": log_config,
        "log_level": "info",
    }
    if workers > 1:
        options["workers"] = workers
    return options


def run(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    forwarded_allow_ips: str,
    workers: int = 1,
    log_config: dict[str, object] | None = None,
) -> None:
    """Serve `app` (one process) or, with workers > 1, uvicorn's workers each building the app from the environment."""
    import uvicorn

    options = uvicorn_options(
        host=host, port=port, forwarded_allow_ips=forwarded_allow_ips, workers=workers, log_config=log_config
    )
    if workers > 1:
        # uvicorn's workers import the app themselves: a factory path, built from DRAFTDESK_* in each.
        uvicorn.run(APP, factory=True, **options)
    else:
        uvicorn.run(app, **options)
