"""The package import graph (issue 42 item 3): `core` imports no other package, and every import that
points up a layer is one of the few listed, generated, in docs/architecture.md ("Upward imports left").

A package is `webapp.<name>`; an edge is any import between two of them (top of a file, inside a
function, `import_module("literal")`; tests/test_dependencies.py reads them). The layers, lowest
first: core, auth, web, the domains (their order among themselves is tests/test_dependencies.py's),
the packages that gather every domain (home, admin, demo, ops), and app. With the listed edges
removed the graph has no cycle; a new upward import fails here, and a listed one that is gone
fails until the list is regenerated (the failure prints the block to paste).
"""

from __future__ import annotations

import graphlib
import re
from pathlib import Path

from tests.test_dependencies import all_imports

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
GATHERING = ("home", "admin", "demo", "ops")
START, END = "<!-- upward-imports:start -->", "<!-- upward-imports:end -->"


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
        where = f"{i.source} → {i.target}"
        if where not in edges.setdefault((src[1], dst[1]), []):
            edges[(src[1], dst[1])].append(where)
    return edges


def upward(edges: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """Return the edges from a lower layer to a higher one."""
    return {pair: where for pair, where in sorted(edges.items()) if rank(pair[0]) < rank(pair[1])}


def generated_block(edges: dict[tuple[str, str], list[str]]) -> str:
    """Return the docs' list of the upward imports left: one line per package pair, with its modules (no line numbers, so edits elsewhere in a file leave it true)."""
    lines = [START]
    for (src, dst), where in upward(edges).items():
        lines.append(f"- `{src}` → `{dst}`: {', '.join(f'`{w}`' for w in sorted(where))}")
    return "\n".join([*lines, END])


class TestPackageGraph:
    def test_core_imports_no_other_package(self) -> None:
        assert [f"core → {d}: {w[0]}" for (s, d), w in package_edges().items() if s == "core"] == []

    def test_upward_imports_are_the_listed_ones(self) -> None:
        """docs/architecture.md lists exactly the upward imports left (paste the block this prints)."""
        text = DOC.read_text()
        match = re.search(re.escape(START) + ".*?" + re.escape(END), text, flags=re.S)
        expected = generated_block(package_edges())
        assert match is not None and match.group(0) == expected, f"docs/architecture.md wants:\n{expected}"

    def test_no_cycle_but_through_a_listed_edge(self) -> None:
        edges = package_edges()
        listed = upward(edges)
        graph: dict[str, set[str]] = {}
        for src, dst in edges:
            if (src, dst) not in listed:
                graph.setdefault(src, set()).add(dst)
        try:
            graphlib.TopologicalSorter(graph).prepare()
        except graphlib.CycleError as err:
            raise AssertionError(f"a cycle between packages: {' → '.join(reversed(err.args[1]))}") from None

    def test_rank_orders_the_layers(self) -> None:
        assert [rank(p) for p in ("core", "auth", "web", "runs", "home", "app")] == [0, 1, 2, 3, 4, 5]
