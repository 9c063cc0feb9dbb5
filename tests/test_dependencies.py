"""Dependencies between the domains run one way (docs/architecture.md, "Layers").

Every module of webapp/ is parsed with `ast`: imports at the top of the file, inside functions,
under `if TYPE_CHECKING`, and `importlib.import_module("literal")`. Each import must be allowed
by the layer table below; a failure names the importing file, its line and the rule it breaks.
webapp/core/domains.py's discovery (routers, commands, cards, demo hooks, models by domain name) is the
one sanctioned dynamic import; any other non-literal `import_module` fails.
"""

from __future__ import annotations

import ast
import functools
import graphlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "webapp"

# The chain, lowest first: a domain may import the domains before it, never those after it.
CHAIN: tuple[str, ...] = ("kb", "datasets", "runs", "checks", "grading", "regression", "gates")

# Domains beside the chain: (the highest chain domain they may import, the side domains they may import).
# Chain domains never import them, except gates, which reads metrics and survey (SIDE_FOR_CHAIN).
SIDE: dict[str, tuple[str | None, frozenset[str]]] = {
    "survey": (None, frozenset()),  # answers of the pilot survey, read by gates
    "metrics": ("kb", frozenset()),  # production events; hallucination flags cite KB revisions
    "evaluator": ("grading", frozenset()),  # prompt-evaluator runs: checks them, agreement with final grades
    "reviews": ("regression", frozenset({"metrics"})),  # PM review of production pairs; adds regression cases
    "alerts": (
        "regression",
        frozenset({"metrics", "ppi"}),
    ),  # notifies metric, hallucination, regression and weekly-quality alerts
    "ppi": (
        "regression",
        frozenset({"evaluator", "metrics"}),
    ),  # judge on all drafts + human sample -> intervals
}
SIDE_FOR_CHAIN: dict[str, frozenset[str]] = {"gates": frozenset({"metrics", "survey", "ppi"})}

# Infrastructure: importable from anywhere; imports only infrastructure and auth (at the bottom too).
INFRASTRUCTURE: frozenset[str] = frozenset(
    f"webapp.{package}.{name}"
    for package, names in {
        "core": [
            "blind",
            "cli_support",
            "config",
            "config_docs",
            "generated_docs",
            "csv_export",
            "db",
            "domains",
            "facts",
            "figures",
            "labels",
            "migrations_runner",
            "models",
            "reactions",
            "retry_policy",
            "safe_input",
            "security",
            "spec",
            "textdiff",
            "timeutil",
            "units",
        ],
        "web": [
            "api_docs",
            "api_schemas",
            "csp",
            "deps",
            "flash",
            "headers",
            "links",
            "navigation",
            "page_view",
            "request_limits",
            "serving",
            "static_assets",
            "templating",
        ],
    }.items()
    for name in names
) | {
    "webapp",
    "webapp.core",
    "webapp.web",
    # A leaf module that lives in a domain package but imports nothing of a domain: the FILE:LINE
    # record reader of every import.
    "webapp.datasets.records",
}

# The contracts a domain's hook modules implement: home.py returns HomeCards, demo.py takes a DemoContext.
CONTRACTS: dict[str, frozenset[str]] = {
    "webapp.web.cards": frozenset({"auth"}),
    "webapp.demo.context": frozenset({"auth", "kb", "datasets", "runs"}),
}

# The top: cross-domain reactions, the app, the command line, and the packages that gather every domain.
FLOWS = "webapp.app.flows"
APP_MODULES: frozenset[str] = frozenset(
    {
        "webapp.app",
        "webapp.app.main",
        "webapp.app.cli",
        "webapp.app.server_cli",
        "webapp.app.remote_cli",
        "webapp.app.errors",
        "webapp.app.warmup",
        "webapp.app.jobs",
        "webapp.app.api_reference",
    }
)
APP_PACKAGES: frozenset[str] = frozenset({"home", "admin", "demo", "ops"})

# A domain's entry points: they call its services (and webapp.app.flows after them).
ENTRY_POINTS: frozenset[str] = frozenset({"routes", "pages", "cli", "home", "demo", "background"})

# The one sanctioned dynamic import.
DISCOVERY = "webapp.core.domains"


def allowed_domains(domain: str) -> frozenset[str]:
    """Return the domains whose modules `domain` may import (auth included, itself excluded)."""
    if domain == "auth":
        return frozenset()
    if domain in CHAIN:
        below = CHAIN[: CHAIN.index(domain)]
        return frozenset({"auth", *below}) | SIDE_FOR_CHAIN.get(domain, frozenset())
    ceiling, sides = SIDE[domain]
    below = CHAIN[: CHAIN.index(ceiling) + 1] if ceiling else ()
    return frozenset({"auth", *below}) | sides


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (or the package a name is imported from)
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.source} imports {self.target}"


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def webapp_modules() -> dict[str, Path]:
    """Return every module of webapp/ (migrations aside: they are frozen history) by dotted name."""
    return {
        module_name(p): p
        for p in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in p.relative_to(PACKAGE).parts
    }


def _resolve(known: dict[str, Path], base: str, names: list[str]) -> list[str]:
    """Return `base` or, for `from base import x` where base.x is a module, base.x."""
    out = [f"{base}.{n}" for n in names if f"{base}.{n}" in known]
    return out if len(out) == len(names) else [base, *out]


def imports_of(name: str, path: Path, known: dict[str, Path]) -> tuple[list[Import], list[Import]]:
    """Return the webapp imports of one module, and its dynamic imports of a non-literal name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    dynamic: list[Import] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = _resolve(known, base, [a.name for a in node.names])
        elif isinstance(node, ast.Call) and ast.unparse(node.func).rpartition(".")[2] == "import_module":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                targets = [arg.value]
            else:
                dynamic.append(Import(name, ast.unparse(arg) if arg else "?", path, node.lineno))
        line = getattr(node, "lineno", 0)
        for t in targets:
            if t == "webapp" or t.startswith("webapp."):
                found.append(Import(name, t, path, line))
    return found, dynamic


def domain_of(module: str) -> str | None:
    """Return the domain package a module belongs to, or None for infrastructure, contracts and the top."""
    if module in INFRASTRUCTURE or module in CONTRACTS or module == FLOWS or module in APP_MODULES:
        return None
    parts = module.split(".")
    if len(parts) >= 2 and (parts[1] in CHAIN or parts[1] in SIDE or parts[1] == "auth"):
        return parts[1]
    return None


def is_top(module: str) -> bool:
    parts = module.split(".")
    if module in CONTRACTS:
        return False
    return module == FLOWS or module in APP_MODULES or (len(parts) >= 2 and parts[1] in APP_PACKAGES)


def is_entry(module: str) -> bool:
    """Tell whether a module is an entry point: named as one, or `<topic>_pages` (a domain's pages split by topic)."""
    name = module.rsplit(".", 1)[-1]
    return (name in ENTRY_POINTS or name.endswith("_pages")) and domain_of(module) is not None


def rule_broken(imp: Import) -> str | None:
    """Return why this import breaks the layering, or None when it is allowed."""
    src, dst = imp.source, imp.target
    if is_top(src) and src != FLOWS:
        return None  # the app, the command line, home, admin and demo gather everything
    if dst in INFRASTRUCTURE:
        return None
    if src in INFRASTRUCTURE:
        if domain_of(dst) == "auth":
            return None
        return "infrastructure imports only infrastructure and auth"
    if src == FLOWS:
        if is_top(dst) or is_entry(dst):
            return "webapp.app.flows calls services, never pages, routes, the CLI or the app"
        return None
    if dst in CONTRACTS:
        if src in CONTRACTS:
            return "a contract imports no other contract"
        if is_entry(src):
            return None
        return "only a domain's home.py / demo.py hooks (and the top) import the hook contracts"
    if src in CONTRACTS:
        d = domain_of(dst)
        if d in CONTRACTS[src] and not is_entry(dst):
            return None
        return f"{src} may import only infrastructure and {', '.join(sorted(CONTRACTS[src]))}"
    if dst == FLOWS:
        if is_entry(src):
            return None
        return (
            "only routes, pages and the CLI call webapp.app.flows (a service never does: that hides a cycle)"
        )
    if is_top(dst):
        if src.endswith(".cli") and dst in ("webapp.app.main", "webapp.app.cli"):
            return None  # `draftdesk serve` and `draftdesk demo` build the app
        return f"{dst} is at the top: no domain imports it"
    s, d = domain_of(src), domain_of(dst)
    assert s is not None and d is not None, imp
    if s == d:
        return None
    if d not in allowed_domains(s):
        return f"{s} may not import {d} (it may import: {', '.join(sorted(allowed_domains(s))) or 'infrastructure only'})"
    if is_entry(dst) and not is_entry(src):
        return f"a service of {s} imports {d}'s entry point {dst}"
    return None


@functools.cache
def all_imports() -> tuple[list[Import], list[Import]]:
    known = webapp_modules()
    found: list[Import] = []
    dynamic: list[Import] = []
    for name, path in known.items():
        f, dyn = imports_of(name, path, known)
        found += [i for i in f if i.target != name]
        dynamic += dyn
    return found, dynamic


class TestLayering:
    def test_the_rules_form_a_dag(self) -> None:
        """Follow the rule table from each domain: no domain reaches itself."""
        graph = {d: allowed_domains(d) for d in ("auth", *CHAIN, *SIDE)}
        assert _find_cycle(graph) == []

    def test_every_module_has_a_layer(self) -> None:
        """A new module of webapp/ lands in a domain, the infrastructure, a contract or the top."""
        unplaced = [
            m
            for m in webapp_modules()
            if domain_of(m) is None and m not in INFRASTRUCTURE and m not in CONTRACTS and not is_top(m)
        ]
        assert unplaced == [], "place these modules in tests/test_dependencies.py and docs/architecture.md"

    def test_no_import_goes_upward(self) -> None:
        """Every import, at the top of a file or inside a function, follows the layer table."""
        found, _ = all_imports()
        broken = [f"{i.where()}: {why}" for i in found if (why := rule_broken(i))]
        assert broken == [], "\n".join(broken)

    def test_only_discovery_imports_by_computed_name(self) -> None:
        """`import_module` with a computed name is webapp/core/domains.py's discovery, nowhere else."""
        _, dynamic = all_imports()
        assert [i.where() for i in dynamic if i.source != DISCOVERY] == []

    def test_no_cycle_between_domains(self) -> None:
        """Domains (every module of each, entry points included, webapp.app.flows and the top aside) form no cycle."""
        found, _ = all_imports()
        edges: dict[tuple[str, str], Import] = {}
        for i in found:
            s, d = domain_of(i.source), domain_of(i.target)
            if s and d and s != d:
                edges.setdefault((s, d), i)
        cycle = _find_cycle({s: [d for s2, d in edges if s2 == s] for s, _ in edges})
        where = [edges[pair].where() for pair in zip(cycle, cycle[1:], strict=False)]
        assert cycle == [], "a cycle between domains:\n" + "\n".join(where)


def _find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str]:
    """Return the nodes along one cycle of a graph (node -> the nodes it imports), or [] when it has none."""
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as err:
        return list(reversed(err.args[1]))  # the error lists each node before the one importing it
    return []


class TestTheCheckerItself:
    """The checker catches what it is meant to (on imports written here, not on the code base)."""

    @pytest.mark.parametrize(
        ("source", "target", "allowed"),
        [
            ("webapp.checks.service", "webapp.regression.service", False),  # upward in the chain
            ("webapp.kb.service", "webapp.checks.types", False),
            ("webapp.runs.service", "webapp.grading.models", False),
            ("webapp.regression.comparison", "webapp.evaluator.service", False),  # chain -> side
            ("webapp.metrics.pages", "webapp.alerts.outbox", False),  # side -> a side it may not import
            ("webapp.checks.service", "webapp.app.flows", False),  # a service calling the flows
            ("webapp.app.flows", "webapp.checks.routes", False),
            ("webapp.web.templating", "webapp.metrics.daily", False),  # infrastructure -> a domain
            ("webapp.regression.service", "webapp.checks.routes", False),  # a service -> an entry point
            ("webapp.runs.service", "webapp.home.pages", False),
            ("webapp.regression.service", "webapp.checks.service", True),
            ("webapp.gates.facts", "webapp.metrics.daily", True),
            ("webapp.alerts.transitions", "webapp.regression.models", True),
            ("webapp.checks.routes", "webapp.app.flows", True),
            ("webapp.app.flows", "webapp.alerts.outbox", True),
            ("webapp.grading.home", "webapp.web.cards", True),
            ("webapp.checks.service", "webapp.core.units", True),
            ("webapp.app.main", "webapp.gates.routes", True),
        ],
    )
    def test_each_import_is_allowed_or_breaks_a_rule(self, source: str, target: str, allowed: bool) -> None:
        assert (rule_broken(Import(source, target, PACKAGE / "x.py", 1)) is None) is allowed

    def test_finds_a_cycle_in_import_order(self) -> None:
        """A cycle is reported along its imports (closed: first node == last); an acyclic graph gives []."""
        cycle = _find_cycle({"checks": ["regression"], "regression": ["grading"], "grading": ["checks"]})
        loop = ["checks", "regression", "grading"]
        assert cycle in [loop[i:] + loop[:i] + [loop[i]] for i in range(3)]
        assert _find_cycle({"checks": ["regression", "kb"], "regression": ["kb"]}) == []

    def test_reads_function_level_and_literal_dynamic_imports(self, tmp_path: Path) -> None:
        """Imports inside functions and import_module("literal") are found; a computed name is reported apart."""
        path = PACKAGE / "checks" / "service.py"
        src = (
            "import importlib\n"
            "def f():\n"
            "    from webapp.regression.service import raise_alerts_for_run\n"
            "    importlib.import_module('webapp.grading.service')\n"
            "    importlib.import_module(name)\n"
        )
        probe = tmp_path / "probe.py"
        probe.write_text(src)
        found, dynamic = imports_of("webapp.checks.service", probe, {"webapp.regression.service": path})
        assert [(i.target, i.line) for i in found] == [
            ("webapp.regression.service", 3),
            ("webapp.grading.service", 4),
        ]
        assert [(i.target, i.line) for i in dynamic] == [("name", 5)]
