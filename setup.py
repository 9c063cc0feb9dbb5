"""Build hook: a wheel of Draft Desk carries the files the app reads beside its Python code.

The templates, static files, data/*.yaml and the two front-end files of the npm packages live at the
repository's top, outside the `webapp` package, and the JS is installed by `npm install` (never
committed). Building a wheel (`pip install .`, `pip wheel .`) copies them into webapp/_bundled/ with
the repository's layout, where webapp/core/config.py (ASSET_ROOT) finds them when the package is installed.
An editable install (`pip install -e`, ./dev setup) copies nothing: it reads the repository itself.
The build fails, naming the file, when the npm packages are not installed (run ./dev setup first):
a wheel without htmx would start and then serve pages that do nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLE = "_bundled"
TREES = ("templates", "static")
FILES = ("data/eval_spec.yaml", "data/model_prices.yaml")
# The npm packages' files webapp/web/static_assets.py serves (VENDOR_FILES); tests/ops/test_packaging.py
# serves each from a built wheel, so a file added there and not here fails.
VENDOR = (
    "node_modules/htmx.org/dist/htmx.min.js",
    "node_modules/plotly.js-basic-dist-min/plotly-basic.min.js",
)


class BuildWithAssets(build_py):
    """build_py that also copies the app's non-Python files into webapp/_bundled."""

    def run(self) -> None:
        """Build the packages, then bundle the assets (except for an editable install)."""
        super().run()
        if getattr(self, "editable_mode", False):
            return
        bundle_assets(Path(self.build_lib) / "webapp" / BUNDLE)


def bundle_assets(target: Path) -> None:
    """Copy templates/, static/, the data files and the vendored JS into `target` (replacing it)."""
    missing = [name for name in (*TREES, *FILES, *VENDOR) if not (ROOT / name).exists()]
    if missing:
        raise SystemExit(
            f"cannot build Draft Desk: {', '.join(missing)} not found in {ROOT} "
            "(the JS comes from the npm packages: run ./dev setup, or npm install, first)"
        )
    if target.exists():
        shutil.rmtree(target)  # a stale build/ must not keep a deleted template
    for tree in TREES:
        shutil.copytree(ROOT / tree, target / tree, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    for name in (*FILES, *VENDOR):
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target / name)


if __name__ == "__main__":  # setuptools' build backend runs this file as __main__; tests import bundle_assets
    setup(cmdclass={"build_py": BuildWithAssets})
