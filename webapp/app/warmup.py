"""Work a server process does once, before its first request: build the routes, open the database, compile the templates.

FastAPI (0.137+) builds an included router's routes (each route's dependency tree and the pydantic
models of its parameters) lazily, on the first request that reaches the router or the first walk
of `fastapi.routing.iter_route_contexts`: about 1 s of CPU for our ~110
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
import sys

from fastapi import FastAPI
from sqlmodel import Session

from webapp.app.main import create_app
from webapp.auth import service as auth_service
from webapp.core.spec import METRIC_NAMES, EvalSpec
from webapp.metrics import calibration, charts
from webapp.metrics.daily import DayMetrics
from webapp.web.links import api_routes, link_rules
from webapp.web.templating import templates


def build_routes(app: FastAPI) -> int:
    """Have FastAPI build every router's routes, and read the link rules; return the number of API routes.

    FastAPI's public route walk (`iter_route_contexts`, in links.api_routes) builds each included
    router's route contexts, which the first request reaching the router would otherwise build.
    Its lazy build is why pyproject.toml pins FastAPI's minor version: a release that builds
    elsewhere would leave the first requests after a start paying again (tests/test_foundation.py's
    warm-up test would fail, not the pages).
    """
    routes = len(api_routes(app))
    link_rules(app)
    return routes


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


# Python's thread switch interval while serving (seconds; the interpreter's default is 0.005).
SWITCH_INTERVAL_S = 0.0005


def settle_interpreter() -> int:
    """Set the serving process's interpreter up for many short requests beside background passes; return the objects frozen.

    Two process-wide settings, both through the standard library's documented calls:
    - `gc.freeze()` after a collection: the objects of the start-up (modules, routes, compiled
      templates, the spec; about 370,000) move to the permanent generation, which full
      collections skip. Without it every full collection walked them all and held the GIL
      250-350 ms, every ~21 s, stalling whatever request was in flight (bench_realistic, 7 Dec:
      12 such pauses in 250 s; with it 20-50 ms each).
    - `sys.setswitchinterval(SWITCH_INTERVAL_S)`: a request thread that gave the GIL up for its
      SQL gets it back within 0.5 ms instead of up to 5 ms while a background pass (the gate sweep,
      the metrics merge, a reaction) computes in Python; a save runs ~23 statements, each a
      release and a re-acquire, so under the default its wait added up to tens of milliseconds.

    Decision (7 Dec, docs/benchmarks.md "7 December"): issue 36 removed `gc.freeze()` because the
    benchmark met its targets without it. Now the pages' p95 target (<= 150 ms) is met only with it:
    the three runs with the freeze met it, none of the four without did. The switch interval's case
    is weaker. The save's p95 was 52-68 ms in four runs with it and 74.7 ms in the one run with the
    freeze alone, which is within the noise between runs. It is kept until more runs decide.
    Tests do not call this: it is for a serving process.
    """
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def warm(app: FastAPI) -> None:
    """Do all of it for `app`, then settle the interpreter (settle_interpreter): what `serve` calls before it listens."""
    build_routes(app)
    open_database(app)
    warm_up(app.state.spec)
    settle_interpreter()


def create_warm_app() -> FastAPI:
    """Build the app from the environment and warm it up: the factory each of `serve --workers N`'s workers calls."""
    app = create_app()
    warm(app)
    return app
