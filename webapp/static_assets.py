"""Serve third-party front-end files from their installed packages, never from the repository.

htmx comes from the npm package `htmx.org` in node_modules (installed by `./dev setup`);
plotly.js comes from the installed `plotly` Python wheel. Both are served with long cache
headers; the GZip middleware compresses them.
"""

from __future__ import annotations

from pathlib import Path

import plotly
from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

from webapp.config import PROJECT_ROOT

router = APIRouter()

VENDOR_FILES: dict[str, Path] = {
    "htmx.min.js": PROJECT_ROOT / "node_modules" / "htmx.org" / "dist" / "htmx.min.js",
    "plotly.min.js": Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
}
CACHE = "public, max-age=31536000, immutable"


@router.get("/static/vendor/{name}", include_in_schema=False)
def vendor_file(name: str) -> FileResponse:
    """Serve a vendored front-end file from its package (public: scripts load before login)."""
    path = VENDOR_FILES.get(name)
    if path is None or not path.is_file():
        raise HTTPException(404, f"{name} is not installed; run ./dev setup")
    return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": CACHE})
