"""No private name (`_x`, dunders aside) of a third-party module is used in webapp/, prompt_evaluator/
or benchmarks/: importing one, `x._name` or `getattr(x, "_name")` on a name a third-party import bound.

Private names are implementation details a library may change in any release; code built on psycopg's
and SQLAlchemy's internals had to be pinned and re-checked on every upgrade (issue 26).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("webapp", "prompt_evaluator", "benchmarks")
# Top-level names that are the repository's own: its packages, and the benchmarks' helper modules
# (the benchmark scripts put benchmarks/ on sys.path and import them by their bare name).
FIRST_PARTY = frozenset(
    {"webapp", "prompt_evaluator", "benchmarks", "tests"}
    | {p.stem for p in (ROOT / "benchmarks").glob("*.py")}
    | {p.stem for p in (ROOT / "prompt_evaluator").glob("*.py")}
)


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _third_party(module: str) -> bool:
    top = module.split(".")[0]
    return bool(top) and top not in FIRST_PARTY and top not in sys.stdlib_module_names


def private_uses(source: str, filename: str = "<source>") -> list[str]:
    """Return 'FILE:LINE: what' for each use of a third-party private name in the source."""
    tree = ast.parse(source, filename=filename)
    found: list[str] = []
    bound: set[str] = set()  # names bound by third-party imports

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _third_party(alias.name):
                    continue
                if any(_private(p) for p in alias.name.split(".")):
                    found.append(f"{filename}:{node.lineno}: import {alias.name}")
                bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not _third_party(node.module):
                continue
            if any(_private(p) for p in node.module.split(".")):
                found.append(f"{filename}:{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{filename}:{node.lineno}: from {node.module} import {alias.name}")
                if alias.name != "*":
                    bound.add(alias.asname or alias.name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("getattr", "setattr", "hasattr"):
            obj, name = (node.args + [None, None])[:2]
            private = isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value)
            if private and isinstance(obj, ast.Name) and obj.id in bound:
                found.append(f"{filename}:{node.lineno}: {ast.unparse(node.func)}({obj.id}, {name.value!r})")
    return sorted(set(found), key=lambda f: (f.split(":")[0], int(f.split(":")[1]), f))


def _files() -> list[Path]:
    return sorted(p for d in SCANNED if (ROOT / d).is_dir() for p in (ROOT / d).rglob("*.py"))


def test_the_repository_uses_no_private_name_of_a_third_party_module() -> None:
    files = _files()
    assert any(p.parts[-2] == "benchmarks" for p in files) and any("webapp" in p.parts for p in files)
    found = [f for p in files for f in private_uses(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert found == [], "third-party private names:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from psycopg._queries import PostgresQuery\n", ["x.py:1: from psycopg._queries import ..."]),
        ("import psycopg._preparing\n", ["x.py:1: import psycopg._preparing"]),
        ("from psycopg import _queries\n", ["x.py:1: from psycopg import _queries"]),
        ("import psycopg\nconn = psycopg.connect()\npsycopg._x\n", ["x.py:3: psycopg._x"]),
        ("import psycopg as pg\npg.pq._status\n", ["x.py:2: pg.pq._status"]),
        ("from sqlalchemy.sql import compiler\ncompiler._c.x\n", ["x.py:2: compiler._c"]),
        ("from sqlalchemy import engine\ngetattr(engine, '_private')\n", ["x.py:2: getattr(engine, '_private')"]),
    ],
)
def test_private_names_of_third_party_modules_are_found(source: str, expected: list[str]) -> None:
    assert private_uses(source, "x.py") == expected


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos._exit(0)\n",  # the standard library is not third-party
        "from collections import _x\n",
        "from webapp import _helpers\nfrom webapp.core.db import _end\n",  # the repository's own
        "from . import _sibling\n",
        "import lean_http\nlean_http._x\n",  # a benchmark's helper module
        "import sqlalchemy\nsqlalchemy.__version__\n",  # dunders are public
        "from psycopg import errors\nvalue = object()\nvalue._private\n",  # not an import-bound name
        "import psycopg\nerrors = psycopg.errors\n",
    ],
)
def test_public_and_own_names_pass(source: str) -> None:
    assert private_uses(source, "x.py") == []
