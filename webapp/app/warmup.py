"""Work a server process does once, before its first request: build the routes, open the database, compile the templates.

FastAPI builds an included router's routes (each route's dependency tree and the pydantic models
of its parameters) on the first request that reaches the router: about 1 s of CPU for our ~110
routes, paid by whoever came first (the first events batch after a start took 0.3 s on a quiet
machine, 4 s on a busy one, and every request beside it waited for the interpreter); the link
rules every signed-in page reads (webapp/web/links.py) walk the routes once more, and the first
statement a process sends sets up the database dialect (the first /grading after a start took
190 ms on SQLite, 300-370 ms on PostgreSQL, then 22 and 43 ms). Jinja
compiles a template on its first render (40 ms or more each; 54 templates), and plotly's JSON
encoder loads on the first chart. Left to the first requests, that cost lands on the people who
arrive first after a start (issue 26's benchmark: ten graders signing in at once waited seconds
for their first pages); `serve` pays it before it listens instead. Tests do not call it.
"""

from __future__ import annotations

import datetime as dt
import gc

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlmodel import Session

from webapp.app.main import create_app
from webapp.auth import service as auth_service
from webapp.core.spec import METRIC_NAMES, EvalSpec
from webapp.metrics import calibration, charts
from webapp.metrics.daily import DayMetrics
from webapp.web.links import link_rules
from webapp.web.templating import templates

WARM_UP_PATH = "/-/warm-up/no-such-page"


def build_routes(app: FastAPI) -> int:
    """Have FastAPI build every router's routes, and read the link rules; return the status of the request (404).

    A path no route serves is matched against every route of every router, which builds them all.
    It is sent to the router itself, not the app: no middleware, no request log line, no session.
    """
    status = TestClient(app.router).get(WARM_UP_PATH).status_code
    link_rules(app)
    return status


def warm_up(spec: EvalSpec) -> int:
    """Compile every template and draw one chart of each kind; return the number of templates compiled."""
    names = templates.env.list_templates(extensions=["html"])
    for name in names:
        templates.env.get_template(name)
    day = DayMetrics(dt.date(2026, 1, 1), 0, 0, None, None, None, None, None, None, None, None)
    pilot = (spec.online_metrics.pilot.start, spec.online_metrics.pilot.end)
    for metric in METRIC_NAMES:
        charts.to_json(charts.metric_figure(metric, [day], spec, None, [], pilot=pilot, low_volume=spec.metrics.low_volume_events))
    charts.to_json(charts.calibration_figure(calibration.calibration_from_days([day])))
    return len(names)


def open_database(app: FastAPI) -> None:
    """Connect, and run the query every signed-in request starts with (a session lookup that finds none).

    The first statement a process sends initializes SQLAlchemy's dialect for the connection and
    compiles the session lookup: 0.2-0.3 s on PostgreSQL that the first signed-in page paid.
    """
    with Session(app.state.engine) as session:
        auth_service.principal_from_session_token(
            session=session, token="warm-up", idle_minutes=app.state.settings.session_idle_minutes
        )


def warm(app: FastAPI) -> None:
    """Do all of it for `app`, then freeze what it made: what `serve` calls before it listens.

    The process then holds ~280,000 objects the garbage collector tracks (modules, routes, models,
    templates), and each of Python's full collections walked them all: 150 ms during which every
    request waited (the realistic benchmark's 250 ms batch page with the server 4 ms on every other
    request around it). `gc.freeze()` moves them to a permanent generation that collections skip
    (what the Python documentation advises for a server's start-up objects).
    """
    build_routes(app)
    open_database(app)
    warm_up(app.state.spec)
    gc.collect()
    gc.freeze()


def create_warm_app() -> FastAPI:
    """Build the app from the environment and warm it up: the factory each of `serve --workers N`'s workers calls."""
    app = create_app()
    warm(app)
    return app
