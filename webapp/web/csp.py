"""The Content-Security-Policy every response carries: only the app's own scripts and styles.

No inline script, no eval, no inline style attribute. One style exception, an exact hash: the
*empty* `<style>` element plotly.js creates and then fills through the CSSOM (`insertRule`, which
CSP does not govern) with its own rules (the toolbar's position and looks, hover labels). The
hash of the empty text allows that element and nothing an attacker could write into one.
plotly.js's basic bundle (webapp/web/static_assets.py) injects no other style text, and needs no eval.
htmx is configured (meta `htmx-config` in base.html) to inject no indicator style and never to eval.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import re
from urllib.parse import urlsplit


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


EMPTY_STYLE_HASH = _sha256("")

DIRECTIVES: dict[str, str] = {
    "default-src": "'none'",
    "script-src": "'self'",
    "style-src": f"'self' {EMPTY_STYLE_HASH}",
    "img-src": "'self' data:",
    "font-src": "'self'",
    "connect-src": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
    "base-uri": "'none'",
    "object-src": "'none'",
}

POLICY = "; ".join(f"{name} {value}" for name, value in DIRECTIVES.items())


def policy_with_form_action(url: str) -> str:
    """Return the policy that also lets a form's submission be redirected to `url`'s origin.

    The login page's "Sign in with ..." form posts here and is redirected to the identity provider:
    browsers check form-action on each redirect after a submission, so 'self' alone would stop it.
    """
    parts = urlsplit(url)
    directives = {**DIRECTIVES, "form-action": f"'self' {parts.scheme}://{parts.netloc}"}
    return "; ".join(f"{name} {value}" for name, value in directives.items())



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
