"""Every script of benchmarks/ that the code, the tests or the docs name exists (one was named and missing)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMED = re.compile(r"benchmarks/([A-Za-z0-9_]+\.py)")


def _texts() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    for folder, pattern in (("docs", "*.md"), ("tests", "*.py"), ("webapp", "*.py"), ("benchmarks", "*.py")):
        files += sorted((ROOT / folder).rglob(pattern))
    return [f for f in files if f.is_file()]


def test_every_named_benchmark_script_exists() -> None:
    missing = [
        f"{path.relative_to(ROOT)}:{n}: benchmarks/{name}"
        for path in _texts()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        for name in NAMED.findall(line)
        if not (ROOT / "benchmarks" / name).is_file()
    ]
    assert missing == []


def test_the_check_sees_a_missing_script() -> None:
    missing = "benchmarks/" + "nope_missing.py"  # split, so this file does not name it
    assert NAMED.findall(f"see benchmarks/fuzz_api.py and {missing}") == ["fuzz_api.py", "nope_missing.py"]
    assert not (ROOT / "benchmarks" / "nope_missing.py").exists()
    assert (ROOT / "benchmarks" / "fuzz_api.py").is_file()
