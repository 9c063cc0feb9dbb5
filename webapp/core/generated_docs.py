"""Pages of the docs site written by a command from the code (the settings table, the API reference).

One way to write them and to check them: `python -m <module>` writes the page when it changed,
`python -m <module> --check` only says whether the committed page is current (exit 1 naming the
command that mends it). Each page's own module says how the page is made.
"""

from __future__ import annotations

import sys
from pathlib import Path

from webapp.core.config import PROJECT_ROOT


def sync_page(doc: Path, fresh: str, *, module: str, argv: list[str] | None = None) -> int:
    """Write `fresh` to `doc` if it differs (`--check` in argv: only report it), and return the exit code."""
    args = sys.argv[1:] if argv is None else argv
    page = doc.read_text(encoding="utf-8") if doc.exists() else ""
    shown = doc.relative_to(PROJECT_ROOT) if doc.is_relative_to(PROJECT_ROOT) else doc
    if "--check" in args:
        if fresh != page:
            print(f"{shown} is out of date: run python -m {module}", file=sys.stderr)
            return 1
        return 0
    if fresh != page:
        doc.write_text(fresh, encoding="utf-8")
        print(f"wrote {shown}")
    return 0
