"""Shared by the fuzz tests and benchmarks/fuzz_api.py: a demo-seeded app and a bearer token per kind of caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session

from webapp.app.main import create_app
from webapp.auth import service as auth_service
from webapp.auth.models import ROLES
from webapp.core.config import Settings
from webapp.core.spec import EvalSpec

INVALID_TOKEN = "dd_invalid-token-that-matches-nothing"
# Who calls: one token per role, an agent's `ingest` token, a token with every role, nobody, a bad token.
CALLERS: tuple[str, ...] = (*ROLES, "ingest", "all_roles", "anonymous", "invalid_token")


@dataclass
class FuzzTarget:
    """The app under test and the Authorization header of each caller (None: anonymous)."""

    app: Any
    headers: dict[str, dict[str, str]] = field(default_factory=dict)


def demo_target(database_url: str, secret_key: str, spec_path: Any, spec: EvalSpec) -> FuzzTarget:
    """Seed the demo (a no-op on a copy of the tests' seeded demo) and return the app with a token for each caller."""
    from webapp.demo.seed import seed_demo

    settings = Settings(database_url=database_url, mode="dev", secret_key=secret_key, spec=spec_path)
    app = create_app(settings)
    target = FuzzTarget(app=app)
    with Session(app.state.engine, expire_on_commit=False) as session:
        seed_demo(session=session, spec=spec)
        user = auth_service.create_user(
            session=session, email="fuzzer@example.test", password="fuzzer-password-1", roles=list(ROLES), name="Fuzzer"
        )
        for caller in CALLERS:
            if caller == "anonymous":
                target.headers[caller] = {}
                continue
            if caller == "invalid_token":
                target.headers[caller] = {"Authorization": f"Bearer {INVALID_TOKEN}"}
                continue
            scopes = None if caller == "all_roles" else [caller]
            _, plain = auth_service.create_token(session=session, user=user, name=f"fuzz-{caller}", scopes=scopes)
            target.headers[caller] = {"Authorization": f"Bearer {plain}"}
        session.commit()
    return target


def api_operations(app: Any) -> list[Any]:
    """Load the app's OpenAPI document with schemathesis; return its operations."""
    import schemathesis

    from webapp.web.api_docs import OPENAPI_URL

    loaded = schemathesis.openapi.from_asgi(OPENAPI_URL, app)
    return [result.ok() for result in loaded.get_all_operations()]


def fuzz_operation(operation: Any, target: FuzzTarget, *, max_examples: int, derandomize: bool = True) -> list[str]:
    """Send up to max_examples valid and as many invalid requests to one operation as every caller; return failures."""
    from hypothesis.errors import Unsatisfiable
    from schemathesis.checks import not_a_server_error, response_schema_conformance, status_code_conformance
    from schemathesis.generation import GenerationMode

    checks = [not_a_server_error, status_code_conformance, response_schema_conformance]
    failures: list[str] = []
    # Valid requests as every caller; invalid ones as a caller who passes the role checks and as
    # one with a bad token (any other caller is turned away before the parameters matter).
    plan = ((GenerationMode.POSITIVE, CALLERS), (GenerationMode.NEGATIVE, ("all_roles", "invalid_token")))
    for mode, callers in plan:
        run = _examples(operation, target, mode, callers, checks, max_examples=max_examples, derandomize=derandomize)
        try:
            run()
        except Unsatisfiable:
            continue  # nothing in this operation can be made invalid (e.g. no parameters)
        except (Exception, BaseExceptionGroup) as exc:  # every failure is reported, with its operation
            failures.append(f"{operation.label} [{mode.value}] {str(exc)[:1500]}")
    return failures


def _examples(
    operation: Any, target: FuzzTarget, mode: Any, callers: tuple[str, ...], checks: list[Any], *, max_examples: int, derandomize: bool
) -> Any:
    """Return a Hypothesis test that sends each generated request of `mode` as each of `callers` and checks it."""
    from hypothesis import HealthCheck, Phase, given, settings

    @settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=derandomize,
        database=None,
        print_blob=False,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        for caller in callers:
            response = case.call(headers=target.headers[caller])
            try:
                case.validate_response(response, checks=checks, headers=target.headers[caller])
            except (Exception, BaseExceptionGroup) as exc:
                raise AssertionError(f"as {caller}: {exc}") from None

    return run
