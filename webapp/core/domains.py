"""The domain packages of webapp/ and the one way to find a kind of module in each.

Each domain package may hold pages.py, routes.py, cli.py, home.py, demo.py, models.py and
background.py. Callers ask `domain_modules("routes")` (or with their own ordered subset of
domains); a domain without that module is simply skipped. This module imports nothing heavy,
so the command line can find the domains without loading the web app.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType

# In the order routers, commands, cards and demo hooks are taken.
DOMAINS: tuple[str, ...] = (
    "auth",
    "accounts",  # auth's pages and routes, above webapp/web
    "home",
    "kb",
    "datasets",
    "runs",
    "checks",
    "regression",
    "grading",
    "metrics",
    "reviews",
    "evaluator",
    "ppi",
    "gates",
    "survey",
    "admin",
    "alerts",
)


def domain_modules(kind: str, domains: Iterable[str] = DOMAINS) -> list[ModuleType]:
    """Import webapp.<domain>.<kind> for each domain that has one, in order."""
    modules = []
    for domain in domains:
        name = f"webapp.{domain}.{kind}"
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name not in (name, f"webapp.{domain}"):
                raise
    return modules
