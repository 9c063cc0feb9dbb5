"""create_app(settings) -> FastAPI: middleware, routers of every domain, static files, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from webapp.app import errors
from webapp.app.jobs import start_jobs, stop_jobs
from webapp.auth.oidc import OidcClient, OidcConfig
from webapp.core import hooks, reactions
from webapp.core.config import ASSET_ROOT, Settings
from webapp.core.db import make_engine
from webapp.core.domains import DOMAINS, domain_modules
from webapp.core.security import csrf_protect
from webapp.ops import health, prometheus
from webapp.ops.logs import RequestLog
from webapp.ops.prometheus import AppMetrics
from webapp.web import api_docs, csp, static_assets
from webapp.web.headers import SecurityHeaders
from webapp.web.request_limits import BodyLimits, json_body_guard
from webapp.web.templating import is_htmx, templates

# Each domain's pages.py (HTML) and routes.py (JSON API under /api/v1) hold a module-level
# `router`; they are included in the order of webapp.core.domains.DOMAINS.


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Run each domain's background.run(app) and the retention job while the server is up, when background jobs are on."""
    tasks = start_jobs(app) if app.state.settings.background_jobs else []
    try:
        yield
    finally:
        await stop_jobs(tasks)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application for the given settings (the eval spec is validated here)."""
    settings = settings or Settings()
    spec = settings.eval_spec  # a malformed spec stops start-up here, naming the key
    app = FastAPI(
        title="Draft Desk",
        version="0.1.0",
        dependencies=[Depends(csrf_protect), Depends(json_body_guard)],
        docs_url=None,
        openapi_url=api_docs.OPENAPI_URL,
        redoc_url=None,
        lifespan=_lifespan,
    )
    app.state.settings = settings
    # the identity provider (None: not configured); a bad DRAFTDESK_OIDC_ROLE_MAP stops start-up here
    config = OidcConfig.from_settings(settings)
    app.state.oidc = OidcClient(config) if config else None
    app.state.spec = spec
    app.state.engine = make_engine(settings.database_url)
    # Who runs the reactions to a request's facts after its commit: the jobs loop, which replaces this
    # callback with its wake-up while it runs (`serve`); with no loop in any process (tests' apps,
    # `serve --no-background`) the request itself, right after its commit; with `--separate-jobs`
    # the `draftdesk jobs` process, which polls (webapp/app/jobs.py, POLL_S).
    app.state.on_facts = None if settings.separate_jobs else reactions.inline(spec)

    # Level 6 (zlib's default): within 1-3% of level 9's size on our pages for a third of its CPU.
    app.add_middleware(GZipMiddleware, minimum_size=1000, compresslevel=6)

    app.add_middleware(SecurityHeaders, cookie_secure=settings.cookie_secure)
    app.add_middleware(BodyLimits)  # each body to its route family's limit (webapp/web/request_limits.py)
    # outermost of all: each request's log line (with its id) and its duration cover everything above
    app.state.app_metrics = AppMetrics()
    app.add_middleware(RequestLog, observe=app.state.app_metrics.observe)

    docs_html = get_swagger_ui_html(openapi_url=api_docs.OPENAPI_URL, title="Draft Desk API")
    docs_csp = csp.docs_policy(bytes(docs_html.body).decode())

    def api_reference(request: Request) -> HTMLResponse:
        """Serve the Swagger UI of /api/v1 with a policy admitting its CDN and its one inline script."""
        return HTMLResponse(docs_html.body, headers={"Content-Security-Policy": docs_csp})

    app.add_route(api_docs.DOCS_URL, api_reference, include_in_schema=False)

    app.include_router(static_assets.router)
    app.mount("/static", StaticFiles(directory=str(ASSET_ROOT / "static")), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> RedirectResponse:
        """Point browsers that ask for /favicon.ico at the SVG icon."""
        return RedirectResponse("/static/favicon.svg", status_code=301)

    app.include_router(health.router)  # /livez, /healthz: no login (webapp/ops/health.py says why)
    app.include_router(prometheus.router)  # /-/metrics: a `metrics`-scoped token or an admin

    # Each domain's pages, then its JSON API under /api/v1 (the OpenAPI document is the JSON API only).
    # Decision (issue 36): the domains in their own order; the order once chosen so that pages
    # skip the API routers' regexes went, as the realistic benchmark meets its targets without it
    # (docs/decisions/0004-plain-optimisations-removed.md). No page path begins with /api/, so no
    # order changes a match.
    for domain in DOMAINS:
        for module in domain_modules("pages", [domain]):
            app.include_router(module.router, include_in_schema=False)
        for module in domain_modules("routes", [domain]):
            app.include_router(module.router, prefix=api_docs.API_PREFIX)
    hooks.answers()  # every domain's answers to the hooks (webapp/core/hooks.py): one answered twice stops start-up here
    api_docs.install(app)

    _install_error_handlers(app)
    errors.install(app)
    return app


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if _wants_json(request):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        if exc.status_code == 401 and not request.headers.get("authorization"):
            # Only a browser without a session is sent to sign in; a caller that presented a
            # bearer token gets its 401 (redirecting it would loop: /login refuses the token too).
            target = "/login?next=" + request.url.path
            if is_htmx(request):
                return Response(status_code=200, headers={"HX-Redirect": target})
            return RedirectResponse(target, status_code=303)
        return templates.TemplateResponse(
            request,
            "error.html",
            {"status_code": exc.status_code, "detail": exc.detail},
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        errors = [
            {
                "field": ".".join(str(p) for p in e["loc"] if p not in ("body", "query", "path")),
                "message": e["msg"],
            }
            for e in exc.errors()
        ]
        if _wants_json(request):
            return JSONResponse({"detail": errors}, status_code=422)
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return templates.TemplateResponse(
            request, "error.html", {"status_code": 422, "detail": detail}, status_code=422
        )
