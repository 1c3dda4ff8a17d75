"""A citation's origin (file, lines, section) from an evidence item, when its source gives one.

Sources are untrusted: only a relative path without '..', a scheme or a backslash, a sane
line range, a hex digest and an `llmwiki://` handle of plain characters are kept."""

from __future__ import annotations

import re
from typing import Any

from bridge.support.text import safe_trace_text
from common.bridge_schemas import CitationOrigin

MAX_LINE = 10**9
MAX_PATH_CHARS = 1000
MAX_HANDLE_CHARS = 2000
HEADING_PATH_CHARS = 300
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HANDLE = re.compile(r"llmwiki://[A-Za-z0-9%._~-]+/pages/[A-Za-z0-9%._~-]+(?:#[A-Za-z0-9%._~-]*)?")
_MARKUP = re.compile(r"[\[\]()`]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _line(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_LINE:
        return value
    return None


def _path(value: Any) -> str | None:
    if not isinstance(value, str) or not value or len(value) > MAX_PATH_CHARS:
        return None
    if (value.startswith("/") or "\\" in value or _SCHEME.match(value) or ".." in value.split("/")
            or not value.isprintable()):
        return None
    return value


def citation_origin(origin: dict[str, Any] | None, section: dict[str, Any] | None) -> CitationOrigin | None:
    """An item's `origin` (path, line_start, line_end, sha256) with its `section`'s heading
    path and handle; None when it has none or it does not hold up."""
    if origin is None:
        return None
    path = _path(origin.get("path"))
    start, end = _line(origin.get("line_start")), _line(origin.get("line_end"))
    if path is None or start is None or end is None or end < start:
        return None
    digest = origin.get("sha256")
    section = section or {}
    handle = section.get("handle")
    heading = section.get("heading_path")
    return CitationOrigin(
        path=path, line_start=start, line_end=end,
        heading_path=safe_trace_text(heading, HEADING_PATH_CHARS) if isinstance(heading, str) else None,
        handle=handle if isinstance(handle, str) and len(handle) <= MAX_HANDLE_CHARS
        and _HANDLE.fullmatch(handle) else None,
        sha256=digest if isinstance(digest, str) and _HEX64.fullmatch(digest) else None)


def location(origin: CitationOrigin | None) -> str:
    """`path:12-18 (Heading > Path)` for prompts and fallback anchors; "" without an origin."""
    if origin is None:
        return ""
    lines = (f"{origin.line_start}" if origin.line_start == origin.line_end
             else f"{origin.line_start}-{origin.line_end}")
    text = f"{_plain(origin.path)}:{lines}"
    return f"{text} ({_plain(origin.heading_path)})" if origin.heading_path else text


def _plain(text: str) -> str:
    """Without the characters of Markdown links and code, so quoted source text cannot pose as
    a citation anchor."""
    return " ".join(_MARKUP.sub(" ", text).split())
