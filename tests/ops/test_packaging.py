"""The installed package: every imported package declared, and a wheel that runs away from the repository.

The full production path (a fresh venv, `pip install` without extras, `serve` on PostgreSQL, a
sign-in) is .ci/smoke-production, run by .ci/run; these tests check its two causes of failure
quickly: an undeclared import (deptry) and a file the wheel does not carry.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from webapp.core import config
from webapp.web import static_assets

ROOT = Path(__file__).resolve().parents[2]


def deptry(*args: str) -> subprocess.CompletedProcess[str]:
    """Run deptry on the repository with the given extra arguments (its report is on stderr)."""
    return subprocess.run(
        [sys.executable, "-m", "deptry", ".", "--no-ansi", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


class TestDeclaredDependencies:
    def test_every_import_of_the_package_is_declared(self) -> None:
        result = deptry()
        assert result.returncode == 0, result.stderr

    def test_an_import_declared_only_through_another_package_fails(self, tmp_path: Path) -> None:
        # The bug of issue 33: scipy came only with the dev extras. Without its line, deptry fails naming it.
        pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
        assert '\n  "scipy",\n' in pyproject
        config = tmp_path / "pyproject.toml"
        config.write_text(pyproject.replace('\n  "scipy",\n', "\n"), encoding="utf-8")
        result = deptry("--config", str(config))
        assert result.returncode == 1
        assert re.search(r"webapp/ppi/estimator\.py:\d+:\d+: DEP00[13] 'scipy'", result.stderr), result.stderr

    def test_dev_extras_do_not_count_as_runtime(self, tmp_path: Path) -> None:
        # Moving scipy into the dev extras (where scikit-learn brought it before) is not declaring it.
        pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
        moved = pyproject.replace('\n  "scipy",\n', "\n").replace('dev = ["pytest",', 'dev = ["scipy", "pytest",')
        config = tmp_path / "pyproject.toml"
        config.write_text(moved, encoding="utf-8")
        result = deptry("--config", str(config))
        assert result.returncode == 1
        assert "DEP004 'scipy' imported but declared as a dev dependency" in result.stderr, result.stderr


class TestSourceCheckout:
    def test_a_checkout_reads_its_own_files(self) -> None:
        # ./dev demo and ./dev test run from the repository: nothing bundled, data/ is the repository's.
        assert not config.INSTALLED
        assert config.ASSET_ROOT == config.PROJECT_ROOT == ROOT
        assert config.DATA_DIR == ROOT / "data"
        assert static_assets.NODE_MODULES == ROOT / "node_modules"


def load_setup() -> ModuleType:
    """Import setup.py as a module (its setup() call runs only as __main__)."""
    spec = importlib.util.spec_from_file_location("draftdesk_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TestBundleAssets:
    def test_vendor_files_match_what_the_app_serves(self) -> None:
        setup = load_setup()
        assert {ROOT / name for name in setup.VENDOR} == set(static_assets.VENDOR_FILES.values())

    def test_a_missing_npm_file_fails_the_build_naming_it(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        setup = load_setup()
        for name in ("templates", "static", "data"):
            (tmp_path / name).mkdir()
        for name in setup.FILES:
            (tmp_path / name).write_text("x: 1\n")
        monkeypatch.setattr(setup, "ROOT", tmp_path)
        with pytest.raises(SystemExit, match=r"node_modules/htmx\.org/dist/htmx\.min\.js.*npm install"):
            setup.bundle_assets(tmp_path / "out")
        assert not (tmp_path / "out").exists()  # nothing half-copied


# Run by the installed wheel's code, from a folder that is not the repository.
PROBE = r"""
import json, sys
from pathlib import Path
from fastapi.testclient import TestClient
import webapp, webapp.core.config as config
from webapp.core.config import Settings
from webapp.evaluator.rubric import builtin_names
from webapp.app.main import create_app
from webapp.core.migrations_runner import upgrade

url = "sqlite:///" + sys.argv[1]
upgrade(url)
settings = Settings(mode="dev", database_url=url)
out = {"package": webapp.__file__, "installed": config.INSTALLED, "asset_root": str(config.ASSET_ROOT),
       "data_dir": str(config.DATA_DIR), "spec": str(settings.spec), "rubrics": builtin_names(),
       "spec_loaded": settings.eval_spec is not None, "prices": settings.evaluator_prices.is_file()}
with TestClient(create_app(settings)) as client:
    for path in ("/login", "/static/css/app.css", "/static/js/app.js", "/static/vendor/htmx.min.js",
                 "/static/vendor/plotly-basic.min.js"):
        r = client.get(path, headers={"Accept-Encoding": "identity"})
        out[path] = [r.status_code, len(r.content), r.content[:20000].decode("utf-8", "replace") if path == "/login" else ""]
print(json.dumps(out))
"""


@pytest.mark.slow
class TestWheel:
    @pytest.fixture(scope="class")
    @classmethod
    def wheel(cls, tmp_path_factory: pytest.TempPathFactory) -> Path:
        out = tmp_path_factory.mktemp("wheel")
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(ROOT)],
            check=True, capture_output=True, text=True, timeout=300,
        )
        (built,) = out.glob("draftdesk-*.whl")
        return built

    def test_the_wheel_carries_the_files_the_app_reads(self, wheel: Path) -> None:
        names = set(zipfile.ZipFile(wheel).namelist())
        for expected in (
            "webapp/_bundled/templates/base.html",
            "webapp/_bundled/templates/auth/login.html",
            "webapp/_bundled/static/css/app.css",
            "webapp/_bundled/static/js/app.js",
            "webapp/_bundled/data/eval_spec.yaml",
            "webapp/_bundled/data/model_prices.yaml",
            "webapp/_bundled/node_modules/htmx.org/dist/htmx.min.js",
            "webapp/_bundled/node_modules/plotly.js-basic-dist-min/plotly-basic.min.js",
            "webapp/migrations/env.py",
            "webapp/migrations/script.py.mako",
        ):
            assert expected in names, expected
        assert any(n.startswith("webapp/migrations/versions/") for n in names)
        assert any(n.startswith("webapp/evaluator/rubrics/") and n.endswith(".yaml") for n in names)
        templates = {p.relative_to(ROOT).as_posix() for p in (ROOT / "templates").rglob("*.html")}
        assert {f"webapp/_bundled/{t}" for t in templates} <= names

    def test_the_installed_wheel_serves_pages_and_scripts_from_another_folder(self, wheel: Path, tmp_path: Path) -> None:
        site = tmp_path / "site"
        zipfile.ZipFile(wheel).extractall(site)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRAFTDESK_")}
        env["PYTHONPATH"] = str(site)  # before the editable install's finder: the wheel's webapp is imported
        result = subprocess.run(
            [sys.executable, "-c", PROBE, str(tmp_path / "probe.db")],
            cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        out = json.loads(result.stdout.strip().splitlines()[-1])
        assert out["package"] == str(site / "webapp" / "__init__.py")
        assert out["installed"] is True
        assert out["asset_root"] == str(site / "webapp" / "_bundled")
        assert out["data_dir"] == str(elsewhere.resolve() / "data")  # writable files: the working folder's data/
        assert out["spec"] == str(site / "webapp" / "_bundled" / "data" / "eval_spec.yaml")
        assert out["spec_loaded"] and out["prices"] and out["rubrics"]
        status, _, page = out["/login"]
        assert status == 200 and 'name="csrf_token"' in page and "/static/vendor/htmx.min.js" in page
        for path, source in (
            ("/static/css/app.css", ROOT / "static" / "css" / "app.css"),
            ("/static/js/app.js", ROOT / "static" / "js" / "app.js"),
            ("/static/vendor/htmx.min.js", static_assets.VENDOR_FILES["htmx.min.js"]),
            ("/static/vendor/plotly-basic.min.js", static_assets.VENDOR_FILES["plotly-basic.min.js"]),
        ):
            assert out[path][:2] == [200, source.stat().st_size], path
