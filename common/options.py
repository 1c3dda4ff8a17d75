"""The shape of one service option: flag, environment variable, parser and documentation."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Option:
    """One setting of a service's typed settings object, and how it is given."""

    name: str
    flag: str
    env: str
    parse: Callable[[str], Any]
    help: str
    repeatable: bool = False
    is_flag: bool = False
    flag_value: bool = True  # what the flag sets (False: `--no-...` turns the setting off)
    aliases: tuple[str, ...] = ()  # other accepted spellings of the flag
    legacy_env: tuple[str, ...] = ()  # older environment variable names still honoured
    file_keys: tuple[str, ...] = ()  # keys in a settings file (the bridge has one)
    secret: bool = False  # never echoed back (tokens, API keys)
    http_only: bool = False  # means nothing to `llmwiki-serve mcp` (stdio), which therefore does not offer it


def parse_public_url(value: str) -> str:
    """An absolute http(s) URL without credentials, query or fragment; no trailing slash."""
    text = value.strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ValueError(f"public URL is not a valid URL: {text}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc \
            or parts.query or parts.fragment:
        raise ValueError("public URL must be an http(s) URL without credentials, query or fragment.")
    return text.rstrip("/")


def reference_text(value: Any) -> str:
    """A JSON value read as text the way the reference (JavaScript's `String`) reads it, trimmed:
    `42` is "42", `1.0` is "1", `true` is "true"; anything else (null, objects) is no text."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    return ""
