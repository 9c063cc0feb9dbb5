"""The Content-Security-Policy every response carries: only the app's own scripts and styles.

No inline script, no eval, no inline style attribute. Two style exceptions, each an exact hash:
the *empty* style element plotly.js creates and then fills through the CSSOM (`insertRule`,
which CSP does not govern), and the fixed maplibre stylesheet text plotly.js injects at load.
Neither can carry anything an attacker chose. htmx is configured (meta `htmx-config` in
base.html) to inject no indicator style and never to eval.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import re
from urllib.parse import urlsplit

# plotly.js also ships maplibre's stylesheet as one fixed string it injects at load; that exact
# text (hashed from the installed file, so an upgrade keeps working) is allowed, nothing else.
_INJECTED_STYLE = re.compile(r'createElement\("style"\);?,?\s*\w+\.id="[0-9a-f]{64}",\w+\.textContent=\'([^\'\\]*)\'')


def vendor_style_hashes() -> list[str]:
    """Return the CSP hashes of the fixed style texts the vendored plotly.js injects."""
    from webapp.static_assets import VENDOR_FILES

    path = VENDOR_FILES["plotly.min.js"]
    if not path.is_file():
        return []
    return [_sha256(text) for text in _INJECTED_STYLE.findall(path.read_text(encoding="utf-8"))]


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


EMPTY_STYLE_HASH = _sha256("")

DIRECTIVES: dict[str, str] = {
    "default-src": "'none'",
    "script-src": "'self'",
    "style-src": " ".join(["'self'", EMPTY_STYLE_HASH, *vendor_style_hashes()]),
    "img-src": "'self' data:",
    "font-src": "'self'",
    "connect-src": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
    "base-uri": "'none'",
    "object-src": "'none'",
}

POLICY = "; ".join(f"{name} {value}" for name, value in DIRECTIVES.items())



_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def _swagger_origins() -> tuple[str, str]:
    """Return the origins FastAPI's Swagger UI page loads its files and icon from (read from FastAPI itself)."""
    from fastapi.openapi.docs import get_swagger_ui_html

    params = inspect.signature(get_swagger_ui_html).parameters

    def origin(name: str) -> str:
        parts = urlsplit(str(params[name].default))
        return f"{parts.scheme}://{parts.netloc}"

    return origin("swagger_js_url"), origin("swagger_favicon_url")


def docs_policy(html: str) -> str:
    """Return the policy of the Swagger UI page: FastAPI's asset origin and exactly its own inline script."""
    hashes = " ".join(_sha256(s) for s in _INLINE_SCRIPT.findall(html))
    assets, icon = _swagger_origins()
    return (
        f"default-src 'none'; script-src {assets} {hashes}; style-src {assets} 'unsafe-inline'; "
        f"img-src 'self' data: {icon}; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
