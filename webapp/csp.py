"""The Content-Security-Policy every response carries: only the app's own scripts and styles.

No inline script, no eval, no inline style. One exception, kept as narrow as it gets: the hash
of the *empty* style element. plotly.js creates one empty `<style>` and fills it through the
CSSOM (`insertRule`, which CSP does not govern); an empty element can carry nothing an attacker
could use, while without it plotly's layout rules (overlaid SVG layers) would be lost. htmx is
configured (meta `htmx-config` in base.html) to inject no indicator style and never to eval.
"""

from __future__ import annotations

import base64
import hashlib
import re

EMPTY_STYLE_HASH = "'sha256-" + base64.b64encode(hashlib.sha256(b"").digest()).decode() + "'"

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



_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
SWAGGER_CDN = "https://cdn.jsdelivr.net"


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def docs_policy(html: str) -> str:
    """Return the policy of the Swagger UI page: its CDN and exactly its own inline script (by hash)."""
    hashes = " ".join(_sha256(s) for s in _INLINE_SCRIPT.findall(html))
    return (
        f"default-src 'none'; script-src {SWAGGER_CDN} {hashes}; style-src {SWAGGER_CDN} 'unsafe-inline'; "
        f"img-src 'self' data: https://fastapi.tiangolo.com; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
