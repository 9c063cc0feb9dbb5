"""The package import graph (issue 42 item 3): every import between packages points down a layer, and
the graph has no cycle, with no exception.

A package is `webapp.<name>`; an edge is any import between two of them (top of a file, inside a
function, `import_module("literal")`; tests/test_dependencies.py reads them). The layers, lowest
first: core, auth, web, the domains (their order among themselves is tests/test_dependencies.py's;
`accounts`, auth's pages and routes, is one), the packages that gather every domain (home, admin,
demo, ops), and app. What a lower domain shows and a higher one knows goes through a hook
(webapp/core/hooks.py), never an import upward.
"""

from __future__ import annotations

import graphlib

from tests.test_dependencies import all_imports

GATHERING = ("home", "admin", "demo", "ops")


def rank(package: str) -> int:
    """Return a package's layer: core 0, auth 1, web 2, a domain 3, a gathering package 4, app 5."""
    return {"core": 0, "auth": 1, "web": 2, "app": 5}.get(package, 4 if package in GATHERING else 3)


def package_edges() -> dict[tuple[str, str], list[str]]:
    """Return every import between two packages of webapp/, with the importing and imported modules."""
    found, _ = all_imports()
    edges: dict[tuple[str, str], list[str]] = {}
    for i in found:
        src, dst = i.source.split("."), i.target.split(".")
        if len(src) < 2 or len(dst) < 2 or src[1] == dst[1]:
            continue
        where = f"{i.where()}"
        edges.setdefault((src[1], dst[1]), []).append(where)
    return edges


def upward(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    """Return the imports from a lower layer to a higher one, each as `file:line: module imports module`."""
    return [w for pair, where in sorted(edges.items()) if rank(pair[0]) < rank(pair[1]) for w in where]


def cycle(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    """Return the packages along one cycle of the graph, or [] when it has none."""
    graph: dict[str, set[str]] = {}
    for src, dst in edges:
        graph.setdefault(src, set()).add(dst)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        return list(reversed(err.args[1]))
    return []


class TestPackageGraph:
    def test_core_imports_no_other_package(self) -> None:
        assert [w for (s, _), where in package_edges().items() if s == "core" for w in where] == []

    def test_web_imports_only_core_and_auth(self) -> None:
        assert [w for (s, d), where in package_edges().items() if s == "web" and d not in ("core", "auth") for w in where] == []

    def test_no_import_points_up_a_layer(self) -> None:
        """A domain imports neither app/ nor the gathering packages, auth not web, web no domain but auth."""
        assert upward(package_edges()) == []

    def test_no_cycle_between_packages(self) -> None:
        found = cycle(package_edges())
        assert found == [], f"a cycle between packages: {' → '.join(found)}"

    def test_rank_orders_the_layers(self) -> None:
        assert [rank(p) for p in ("core", "auth", "web", "runs", "accounts", "home", "app")] == [0, 1, 2, 3, 3, 4, 5]

    def test_the_checks_catch_a_bad_graph(self) -> None:
        """An upward edge and a cycle, written here, are both found."""
        edges = {("runs", "app"): ["x.py:1: webapp.runs.pages imports webapp.app.main"], ("app", "runs"): ["y.py:2: ..."]}
        assert upward(edges) == ["x.py:1: webapp.runs.pages imports webapp.app.main"]
        assert sorted(cycle(edges)[:2]) == ["app", "runs"]
        assert cycle({("app", "runs"): []}) == []
