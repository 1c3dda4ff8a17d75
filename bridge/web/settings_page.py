"""`GET /settings`: the guided setup page, one HTML document with its CSS and JS inlined and hashed."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from aiohttp import web

# Where settings.html wants its stylesheet and script; the page ships as three files so each can be
# read and edited on its own, and is served as one so the CSP can pin both by hash.
STYLE_SLOT = "<!-- settings.css -->"
SCRIPT_SLOT = "<!-- settings.js -->"


@dataclass(frozen=True)
class SettingsPage:
    html: bytes
    csp: str


def _sha256_source(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def build_page(html: str, css: str, js: str) -> SettingsPage:
    """Inline the stylesheet and script, and allow exactly those two (by hash) and same-origin fetches."""
    if STYLE_SLOT not in html or SCRIPT_SLOT not in html:
        raise ValueError("settings.html must contain the stylesheet and script slots")
    style, script = f"\n{css}", f"\n{js}"
    page = (html.replace(STYLE_SLOT, f"<style>{style}</style>")
            .replace(SCRIPT_SLOT, f"<script>{script}</script>"))
    csp = "; ".join((
        "default-src 'none'",
        f"script-src {_sha256_source(script)}",
        f"style-src {_sha256_source(style)}",
        "connect-src 'self'",
        "img-src 'self' data:",  # the favicon is inline, so a browser asks for no /favicon.ico
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ))
    return SettingsPage(page.encode("utf-8"), csp)


@cache
def settings_page() -> SettingsPage:
    static = resources.files("bridge") / "static"
    return build_page(*((static / name).read_text(encoding="utf-8")
                        for name in ("settings.html", "settings.css", "settings.js")))


async def settings_html(request: web.Request) -> web.Response:
    """The page holds no settings and no secrets: it reads them through the JSON endpoints."""
    page = settings_page()
    return web.Response(body=page.html, content_type="text/html", charset="utf-8", headers={
        "Content-Security-Policy": page.csp,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    })
