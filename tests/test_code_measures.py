"""The code's measures, checked (issue 36): typed data, small modules, short functions.

Counted over webapp/ except its migrations and demo content (webapp/demo/ and each domain's
demo.py: fixture text, not logic). The thresholds are the ones issue 36 set; ruff's complexity rules
(C901 at 15, PLR0915 too-many-statements) run in `./dev test` through pyproject.toml. Run this file
as a script (`python tests/test_code_measures.py`) to print the figures per domain.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "webapp"

MAX_ANY_PER_1000_LINES = 5.0
MAX_DICT_STR_ANY = 30
MAX_TYPE_IGNORES = 10
MAX_MODULE_LINES = 500
MAX_LONG_FUNCTIONS = 3
LONG_FUNCTION_LINES = 80

ANY = re.compile(r"\bAny\b")
DICT_STR_ANY = re.compile(r"dict\[str,\s*Any\]")
TYPE_IGNORE = re.compile(r"#\s*type:\s*ignore")


def measured_files() -> list[Path]:
    """Return webapp's modules that the measures cover (migrations and demo content aside)."""
    out: list[Path] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).parts
        if rel[0] in ("migrations", "demo", "_bundled") or path.name == "demo.py":
            continue
        out.append(path)
    return out


@dataclass(frozen=True)
class LongFunction:
    path: Path
    name: str
    line: int
    length: int

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} {self.name} ({self.length} lines)"


def long_functions(path: Path, limit: int = LONG_FUNCTION_LINES) -> list[LongFunction]:
    """Return the functions of a module longer than `limit` lines (decorators and docstring included)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[LongFunction] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > limit:
                found.append(LongFunction(path, node.name, node.lineno, length))
    return found


@dataclass(frozen=True)
class Measures:
    lines: int
    any_count: int
    dict_str_any: list[str]
    type_ignores: list[str]
    big_modules: list[str]
    long_functions: list[LongFunction]

    @property
    def any_per_1000(self) -> float:
        return 1000.0 * self.any_count / max(self.lines, 1)


def measure(files: list[Path]) -> Measures:
    """Return the measures of `files`."""
    lines = any_count = 0
    dict_any: list[str] = []
    ignores: list[str] = []
    big: list[str] = []
    longs: list[LongFunction] = []
    for path in files:
        text = path.read_text()
        n = text.count("\n")
        lines += n
        rel = path.relative_to(ROOT)
        for number, line in enumerate(text.splitlines(), start=1):
            any_count += len(ANY.findall(line))
            dict_any += [f"{rel}:{number}"] * len(DICT_STR_ANY.findall(line))
            ignores += [f"{rel}:{number}"] * len(TYPE_IGNORE.findall(line))
        if n > MAX_MODULE_LINES:
            big.append(f"{rel} ({n} lines)")
        longs += long_functions(path)
    return Measures(lines, any_count, dict_any, ignores, big, longs)


MEASURES = measure(measured_files())


def test_any_is_rare() -> None:
    """`Any` at most 5 per 1,000 lines: data has a type (pydantic models, dataclasses, TypedDicts)."""
    m = MEASURES
    assert m.any_per_1000 <= MAX_ANY_PER_1000_LINES, f"Any: {m.any_count} in {m.lines} lines ({m.any_per_1000:.1f} per 1,000)"


def test_few_untyped_dicts() -> None:
    """At most 30 `dict[str, Any]` (JSON columns and raw payloads as they arrive)."""
    found = MEASURES.dict_str_any
    assert len(found) <= MAX_DICT_STR_ANY, f"{len(found)} dict[str, Any]: " + ", ".join(found)


def test_few_type_ignores() -> None:
    """At most 10 `# type: ignore`."""
    found = MEASURES.type_ignores
    assert len(found) <= MAX_TYPE_IGNORES, f"{len(found)} type: ignore: " + ", ".join(found)


def test_no_module_over_500_lines() -> None:
    """No module over 500 lines (docs/architecture.md)."""
    assert MEASURES.big_modules == []


def test_few_long_functions() -> None:
    """At most 3 functions over 80 lines."""
    found = MEASURES.long_functions
    assert len(found) <= MAX_LONG_FUNCTIONS, "\n".join(str(f) for f in found)


def test_long_function_finder_counts_decorators_and_body(tmp_path: Path) -> None:
    """The finder measures from the first decorator to the last line of the body."""
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    (tmp_path / "m.py").write_text(f"@decorator\ndef f():\n{body}\n\ndef g():\n    return 1\n")
    found = long_functions(tmp_path / "m.py")
    assert [(f.name, f.line, f.length) for f in found] == [("f", 2, 82)]


def main() -> None:
    """Print the measures per top-level package of webapp/ and in total."""
    by_package: dict[str, list[Path]] = {}
    for path in measured_files():
        by_package.setdefault(path.relative_to(PACKAGE).parts[0], []).append(path)
    print(f"{'package':<16}{'lines':>7}{'Any':>6}{'/1000':>7}{'dictAny':>9}{'ignore':>8}{'>500':>6}{'>80':>5}")
    for name, files in sorted(by_package.items()):
        m = measure(files)
        print(
            f"{name:<16}{m.lines:>7}{m.any_count:>6}{m.any_per_1000:>7.1f}{len(m.dict_str_any):>9}"
            f"{len(m.type_ignores):>8}{len(m.big_modules):>6}{len(m.long_functions):>5}"
        )
    m = MEASURES
    print(
        f"{'total':<16}{m.lines:>7}{m.any_count:>6}{m.any_per_1000:>7.1f}{len(m.dict_str_any):>9}"
        f"{len(m.type_ignores):>8}{len(m.big_modules):>6}{len(m.long_functions):>5}"
    )
    print(f"targets: Any <= {MAX_ANY_PER_1000_LINES}/1000, dict[str, Any] <= {MAX_DICT_STR_ANY}, ignores <= {MAX_TYPE_IGNORES},")
    print(f"         no module > {MAX_MODULE_LINES} lines, <= {MAX_LONG_FUNCTIONS} functions > {LONG_FUNCTION_LINES} lines")
    for f in m.long_functions:
        print("long:", f)
    for b in m.big_modules:
        print("big:", b)


if __name__ == "__main__":
    main()
