"""Dependencies between the domains run one way (docs/architecture.md, "Layers").

Every module of webapp/ is parsed with `ast`: imports at the top of the file, inside functions,
under `if TYPE_CHECKING`, and `importlib.import_module("literal")`. Each import must be allowed
by the layer table below; a failure names the importing file, its line and the rule it breaks.
webapp/core/domains.py's discovery (routers, commands, cards, demo hooks, reactions, hook answers,
models by domain name) is the one sanctioned dynamic import; any other non-literal `import_module`
fails. The table is the rules themselves (the chain, what each domain beside it may import, the
infrastructure and top packages, the entry points' names): there is no list of exceptions.
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
# Chain domains never import them, except gates, which reads metrics, survey and ppi (SIDE_FOR_CHAIN).
SIDE: dict[str, tuple[str | None, frozenset[str]]] = {
    "accounts": (None, frozenset()),  # auth's pages and routes (auth itself is below webapp/web)
    "survey": (None, frozenset()),  # answers of the pilot survey, read by gates
    "metrics": ("kb", frozenset()),  # production events; hallucination flags cite KB revisions
    "evaluator": ("grading", frozenset()),  # prompt-evaluator runs: checks them, agreement with final grades
    "reviews": ("regression", frozenset({"metrics"})),  # PM review of production pairs; adds regression cases
    "alerts": ("regression", frozenset({"metrics", "ppi"})),  # metric, hallucination, regression, weekly-quality alerts
    "ppi": ("regression", frozenset({"evaluator", "metrics"})),  # judge on all drafts + human sample -> intervals
}
SIDE_FOR_CHAIN: dict[str, frozenset[str]] = {"gates": frozenset({"metrics", "survey", "ppi"})}

# Infrastructure, importable from anywhere: webapp/core/ (imports no other package: tests/test_package_graph.py)
# and webapp/web/ (imports core and auth), and one leaf module of a domain package that imports no domain.
INFRASTRUCTURE_PACKAGES: frozenset[str] = frozenset({"core", "web"})
LEAVES: frozenset[str] = frozenset({"webapp.datasets.records"})  # the FILE:LINE record reader of every import

# The top gathers every domain and is imported by none: the app shell and the packages over all domains.
TOP_PACKAGES: frozenset[str] = frozenset({"app", "home", "admin", "demo", "ops"})

# A domain's entry points: they call its services; a service never imports one.
ENTRY_POINTS: frozenset[str] = frozenset({"routes", "pages", "cli", "home", "demo", "background"})
# Found by name (webapp/core/domains.py) and imported by nobody: a domain's reactions to facts, its answers to hooks.
REGISTERED: frozenset[str] = frozenset({"reactions", "provides"})

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


def package_of(module: str) -> str | None:
    """Return the package of webapp/ a module is in ("runs" for webapp.runs.service), None for webapp itself."""
    parts = module.split(".")
    return parts[1] if len(parts) >= 2 else None


def is_infrastructure(module: str) -> bool:
    return module == "webapp" or package_of(module) in INFRASTRUCTURE_PACKAGES or module in LEAVES


def is_top(module: str) -> bool:
    return package_of(module) in TOP_PACKAGES


def domain_of(module: str) -> str | None:
    """Return the domain package a module belongs to, or None for infrastructure and the top."""
    d = package_of(module)
    if is_infrastructure(module) or d is None or not (d in CHAIN or d in SIDE or d == "auth"):
        return None
    return d


def kind_of(module: str) -> str:
    """Return a module's last name, `<topic>_pages` read as "pages" (a domain's pages split by topic)."""
    name = module.rsplit(".", 1)[-1]
    return "pages" if name.endswith("_pages") else name


def is_entry(module: str) -> bool:
    """Tell whether a module is a domain's entry point (routes, pages, cli, home, demo, background)."""
    return kind_of(module) in ENTRY_POINTS and domain_of(module) is not None


def rule_broken(imp: Import) -> str | None:
    """Return why this import breaks the layering, or None when it is allowed."""
    src, dst = imp.source, imp.target
    if domain_of(dst) is not None and kind_of(dst) in REGISTERED:
        return f"{dst} is found by name (webapp/core/domains.py): nothing imports it"
    if is_top(src):
        return None  # the app, the command line, home, admin, demo and ops gather everything
    if is_infrastructure(dst):
        return None
    if is_infrastructure(src):
        return None if domain_of(dst) == "auth" else "infrastructure imports only infrastructure and auth"
    if is_top(dst):
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
        """A new module of webapp/ lands in a domain, the infrastructure or the top (a new package is placed here)."""
        unplaced = [m for m in webapp_modules() if domain_of(m) is None and not is_infrastructure(m) and not is_top(m)]
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
        """Domains (every module of each, entry points included, the top aside) form no cycle."""
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
            ("webapp.runs.hooks", "webapp.grading.status", False),  # a hook's declaration names no answer
            ("webapp.regression.comparison", "webapp.evaluator.service", False),  # chain -> side
            ("webapp.metrics.pages", "webapp.alerts.outbox", False),  # side -> a side it may not import
            ("webapp.metrics.demo", "webapp.runs.demo_context", False),  # metrics may not import runs
            ("webapp.checks.pages", "webapp.app.main", False),  # a domain -> the top
            ("webapp.grading.demo", "webapp.demo.context", False),
            ("webapp.metrics.home", "webapp.home.pages", False),
            ("webapp.runs.service", "webapp.home.pages", False),
            ("webapp.web.templating", "webapp.metrics.daily", False),  # infrastructure -> a domain
            ("webapp.web.deps", "webapp.accounts.pages", False),
            ("webapp.core.db", "webapp.runs.models", False),
            ("webapp.auth.service", "webapp.accounts.signin", False),  # auth sits below accounts
            ("webapp.regression.service", "webapp.checks.routes", False),  # a service -> an entry point
            ("webapp.ppi.reactions", "webapp.regression.reactions", False),  # found by name, imported by nobody
            ("webapp.app.main", "webapp.grading.provides", False),
            ("webapp.regression.service", "webapp.checks.service", True),
            ("webapp.gates.facts", "webapp.metrics.daily", True),
            ("webapp.alerts.transitions", "webapp.regression.models", True),
            ("webapp.grading.provides", "webapp.runs.hooks", True),  # the answer imports the question
            ("webapp.regression.pages", "webapp.checks.pages", True),  # an entry point -> a lower one's
            ("webapp.metrics.demo", "webapp.core.demo_context", True),
            ("webapp.grading.home", "webapp.web.cards", True),
            ("webapp.accounts.pages", "webapp.web.deps", True),
            ("webapp.web.deps", "webapp.auth.service", True),
            ("webapp.checks.service", "webapp.core.units", True),
            ("webapp.checks.service", "webapp.datasets.records", True),  # the leaf
            ("webapp.app.main", "webapp.gates.routes", True),
            ("webapp.admin.pages", "webapp.runs.hooks", True),
        ],
    )
    def test_each_import_is_allowed_or_breaks_a_rule(self, source: str, target: str, allowed: bool) -> None:
        assert (rule_broken(Import(source, target, PACKAGE / "x.py", 1)) is None) is allowed

    def test_a_forbidden_import_in_a_file_fails_naming_it(self, tmp_path: Path) -> None:
        """A module that imports upward (here: runs' pages importing grading) is reported at its file and line, with the rule."""
        probe = tmp_path / "pages.py"
        probe.write_text("from webapp.core.db import SessionDep\nfrom webapp.grading import status\n")
        known = {"webapp.grading.status": PACKAGE / "grading" / "status.py"}
        found, _ = imports_of("webapp.runs.pages", probe, known)
        broken = [(i.target, i.line, why) for i in found if (why := rule_broken(i))]
        assert broken == [("webapp.grading.status", 2, "runs may not import grading (it may import: auth, datasets, kb)")]

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
