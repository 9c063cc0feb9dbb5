"""The thin client installs alone (httpx, typer, rich and what they need) and its --help loads no server module."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER_PACKAGES = ("webapp", "prompt_evaluator", "sqlmodel", "sqlalchemy", "fastapi", "starlette", "pandas", "numpy", "alembic", "openai")
LOADED = (
    "import sys, runpy; sys.argv = ['draftdesk', 'remote', '--help']\n"
    "try:\n    runpy.run_module({module!r}, run_name='__main__')\nexcept SystemExit:\n    pass\n"
    "import json; print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})), file=sys.stderr)\n"
)


def _loaded(python: str, module: str) -> set[str]:
    done = subprocess.run([python, "-c", LOADED.format(module=module)], capture_output=True, text=True, timeout=120, check=False)
    assert "push-run" in done.stdout, done.stdout + done.stderr
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.slow
def test_the_thin_client_installs_into_a_fresh_venv_without_the_server(tmp_path: Path) -> None:
    venv.create(tmp_path / "venv", with_pip=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(ROOT / "remote")],
                             capture_output=True, text=True, timeout=600, check=False)
    assert install.returncode == 0, install.stderr
    listed = subprocess.run([python, "-m", "pip", "list", "--format=json"], capture_output=True, text=True, timeout=120, check=True)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"draftdesk-remote", "httpx", "typer", "rich"} <= names
    assert not names & {"draftdesk", "fastapi", "sqlmodel", "sqlalchemy", "pandas", "openai", "alembic", "psycopg"}
    helped = subprocess.run([str(tmp_path / "venv" / "bin" / "draftdesk"), "remote", "--help"], capture_output=True, text=True, timeout=120, check=False)
    assert helped.returncode == 0 and "kb-sync" in helped.stdout
    assert not _loaded(python, "draftdesk_remote.__main__") & set(SERVER_PACKAGES)


def test_remote_help_in_the_full_install_loads_no_server_library() -> None:
    code = "import sys; sys.argv = ['draftdesk', 'remote', '--help']\nfrom webapp.app.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
    done = subprocess.run([sys.executable, "-c", code + "import json; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert "push-run" in done.stdout, done.stdout + done.stderr
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert "draftdesk_remote" in loaded
    assert not loaded & {"sqlmodel", "sqlalchemy", "fastapi", "pandas", "numpy", "openai", "alembic"}
