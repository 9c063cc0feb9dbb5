"""The `draftdesk` command loads a domain only when one of its commands runs, yet lists them all.

The start-up time itself is measured by benchmarks/bench_hostile.py (timings are not tests); these
tests hold the behaviour that makes it fast and keeps the help complete.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from tests.test_safe_input import DEPTH_400K, alias_bomb
from webapp.app import cli
from webapp.core.domains import domain_modules
from webapp.core.safe_input import MAX_DEPTH

ROOT = Path(__file__).resolve().parent.parent
# `draftdesk ARGS`; at its exit, print the exit code and the heavy modules it loaded
PROBE = (
    "import sys\n"
    "from webapp.app.cli import main\n"
    "try:\n    main()\n"
    "except SystemExit as e:\n"
    "    heavy = ('sqlmodel', 'sqlalchemy', 'fastapi', 'pandas', 'plotly', 'webapp.app.main')\n"
    "    print(e.code, sorted(m for m in heavy if m in sys.modules))\n"
)


def _registered() -> tuple[dict[str, str], dict[str, str]]:
    """Register every domain's (and CLI_MODULES') commands eagerly; return command -> domain for both levels."""
    top: dict[str, str] = {}
    imports: dict[str, str] = {}
    modules = [(m.__name__.split(".")[1], m) for m in domain_modules("cli")]
    modules += [(key, cli.cli_module(key)) for key in cli.CLI_MODULES]
    for domain, module in modules:
        root, import_app = typer.Typer(), typer.Typer()
        module.register(root, import_app)
        for table, app in ((top, root), (imports, import_app)):
            for name in typer.main.get_group(app).commands:
                assert name not in table, f"{name} is registered by {table[name]} and {domain}"
                table[name] = domain
    return top, imports


def test_the_tables_name_every_command_the_domains_register() -> None:
    top, imports = _registered()
    assert top == cli.COMMANDS
    assert imports == cli.IMPORT_COMMANDS


def _listed(help_text: str) -> list[str]:
    """Return the command names of the help's Commands panel, in order."""
    panel = help_text.split("Commands")[1]
    return [line.split()[1] for line in panel.splitlines() if line.startswith("│ ") and line[2] != " "]


def test_help_lists_every_command_with_its_own_help() -> None:
    top, imports = _registered()
    runner = CliRunner()
    out = runner.invoke(cli.app, ["--help"])
    assert out.exit_code == 0, out.output
    assert _listed(out.output) == ["db", "import", *cli.COMMANDS] and set(cli.COMMANDS) == set(top)
    # Each lazily found command shows the one-line help its domain declares.
    assert "List imported datasets (name, version, cases, hash)." in out.output
    assert "Launch gates: print the report;" in out.output
    out = runner.invoke(cli.app, ["import", "--help"])
    assert out.exit_code == 0, out.output
    assert _listed(out.output) == list(imports)
    # A nested group found lazily still has its subcommands.
    out = runner.invoke(cli.app, ["alerts", "channels", "--help"])
    assert out.exit_code == 0 and "remove" in out.output


def test_an_unknown_command_is_a_usage_error() -> None:
    out = CliRunner().invoke(cli.app, ["no-such-command"])
    assert out.exit_code == 2 and "No such command" in out.output


def test_hostile_files_are_refused_by_the_whole_command_with_file_line(tmp_path: Path) -> None:
    """Exit 2 naming FILE:LINE, before the database layer or the web app is even loaded."""
    nested = "[" * DEPTH_400K + "]" * DEPTH_400K  # a 400 kB file
    assert len(alias_bomb().encode()) <= 355
    deep = f"Refused: nesting deeper than {MAX_DEPTH} levels"
    cases = {
        # *d stands for 11 111 nodes, over the per-alias limit; it first appears on line 7.
        "bomb.yaml": (alias_bomb(), "bomb.yaml:7: Refused: YAML alias *d expands to 11111 nodes"),
        "deep.jsonl": ('{"id": "ok"}\n{"id": "deep", "x": ' + nested + "}\n", f"deep.jsonl:2: {deep}"),
        "deep.yaml": ("- id: deep\n  x: " + nested + "\n", f"deep.yaml:2: {deep}"),
    }
    db = f"sqlite:///{tmp_path}/cli.db"
    env = {"PATH": "/usr/bin:/bin", "DRAFTDESK_MODE": "dev", "DRAFTDESK_DATABASE_URL": db}
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        args = [sys.executable, "-c", PROBE, "import", "dataset", str(path)]
        done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
        assert done.stdout.strip() == "2 []", (name, done.stdout + done.stderr)
        assert done.stderr.startswith(f"{path.parent}/{message}"), done.stderr
        assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    # Refused before the database was opened: it was not even created.
    assert not (tmp_path / "cli.db").exists()


def test_both_helps_load_no_heavy_module() -> None:
    """`draftdesk --help` (every domain's cli.py) and `prompt-evaluator --help` import no service (issue 36 item 7).

    The time is benchmarks/bench_cli_help.py's; what makes it short is that no command module
    imports SQLModel, FastAPI, pandas, the openai SDK... at its top.
    """
    heavy = ("sqlmodel", "sqlalchemy", "fastapi", "pandas", "scipy", "plotly", "openai", "numpy")
    for module in ("webapp.app.cli", "prompt_evaluator.cli"):
        code = (
            f"import sys\nsys.argv = ['x', '--help']\nfrom {module} import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', sorted(m for m in {heavy!r} if m in sys.modules))\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert "Usage" in done.stdout, done.stdout + done.stderr
        assert done.stdout.strip().splitlines()[-1] == "LOADED []", (module, done.stdout[-300:])
    # The probe can fail: importing a command's service at the top is seen.
    done = subprocess.run(
        [sys.executable, "-c", f"import webapp.runs.service, sys; print(sorted(m for m in {heavy!r} if m in sys.modules))"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert "sqlmodel" in done.stdout
