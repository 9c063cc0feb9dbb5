"""Build the demo: users, KB, the 100-case dataset and the demo run, then each domain's demo hook.

The KB, the dataset and the drafts go through the normal imports (so the dataset's sha256 is
the real hash of its JSONL). Seeding a database that already holds the demo changes nothing.
"""

from __future__ import annotations

import datetime as dt
import random

from sqlmodel import Session, col, select

from webapp.auth import service as auth_service
from webapp.core import reactions
from webapp.core.domains import domain_modules
from webapp.core.spec import EvalSpec
from webapp.datasets import service as datasets_service
from webapp.datasets.models import EvalCase
from webapp.demo import content as c
from webapp.demo.context import DEMO_HOOK_DOMAINS, DemoContext
from webapp.kb import sync as kb_sync
from webapp.runs import hooks as runs_hooks
from webapp.runs import service as runs_service
from webapp.runs.models import Draft, Run


class DemoHookError(RuntimeError):
    """A domain's demo hook failed; the message names the domain."""


def demo_today(spec: EvalSpec) -> dt.date:
    """Return the demo's 'today': a fixed day after the pilot, so the demo is the same on every run."""
    return spec.online_metrics.pilot.end + dt.timedelta(days=9)


def _context(*, session: Session, spec: EvalSpec, seed: int) -> DemoContext:
    users = {}
    for key, email, _name, _roles in c.DEMO_USERS:
        user = auth_service.get_user_by_email(session=session, email=email)
        assert user is not None, f"demo user {email} is missing"
        users[key] = user
    run = runs_service.resolve_run(session=session, ref=c.RUN_NAME)
    dataset = datasets_service.get_dataset(session=session, ref=run.dataset_id)
    cases = {
        case.case_id: case
        for case in session.exec(select(EvalCase).where(col(EvalCase.dataset_id) == dataset.id).order_by(col(EvalCase.position))).all()
    }
    by_pk = {case.id: case.case_id for case in cases.values()}
    drafts = {
        by_pk[d.case_pk]: d
        for d in session.exec(select(Draft).where(Draft.run_id == run.id, Draft.sample_index == 0)).all()
    }
    return DemoContext(
        rng=random.Random(seed),
        today=demo_today(spec),
        users=users,
        dataset=dataset,
        cases=cases,
        run=run,
        drafts=drafts,
    )


def is_seeded(*, session: Session) -> bool:
    """Tell whether the database already holds the demo (its run exists)."""
    return session.exec(select(Run).where(Run.name == c.RUN_NAME)).first() is not None


def seed_demo(*, session: Session, spec: EvalSpec, seed: int = 7, hooks: bool = True) -> DemoContext:
    """Seed the demo into the session's database (a no-op when it is already there); return its context."""
    if is_seeded(session=session):
        return _context(session=session, spec=spec, seed=seed)
    content = c.build_content(seed)
    for _key, email, name, roles in c.DEMO_USERS:
        if auth_service.get_user_by_email(session=session, email=email) is None:
            auth_service.create_user(session=session, email=email, password=c.DEMO_PASSWORD, roles=roles, name=name)
    kb_sync.import_kb(session=session, data=content.kb_jsonl, path="demo-kb.jsonl")
    datasets_service.import_dataset(
        session=session, data=content.dataset_jsonl, path=f"{c.DATASET_NAME}.jsonl", name=c.DATASET_NAME
    )
    runs_hooks.import_drafts(
        session=session,
        data=content.drafts_jsonl,
        path=f"{c.RUN_NAME}.jsonl",
        run_name=c.RUN_NAME,
        dataset=c.DATASET_NAME,
        model=c.RUN_MODEL,
        prompt_version=c.RUN_PROMPT_VERSION,
        notes="Demo run: mostly good drafts, with five planted failures (see docs/demo.md).",
        source="demo",
    )
    session.flush()
    ctx = _context(session=session, spec=spec, seed=seed)
    if hooks:
        run_hooks(session=session, spec=spec, ctx=ctx)
    return ctx


def run_hooks(*, session: Session, spec: EvalSpec, ctx: DemoContext) -> list[str]:
    """Call seed() in webapp/<domain>/demo.py for each domain of DEMO_HOOK_DOMAINS that has one."""
    ran = []
    for module in domain_modules("demo", DEMO_HOOK_DOMAINS):
        domain = module.__name__.split(".")[1]
        try:
            module.seed(session=session, spec=spec, ctx=ctx)
            reactions.run_in_session(session, spec)  # the next hook sees what this one's facts caused
        except Exception as exc:
            raise DemoHookError(f"the {domain} demo hook failed: {exc.__class__.__name__}: {exc}") from exc
        ran.append(domain)
    ctx.extra["hooks_run"] = ran
    return ran
