"""Splitting a page into YAML frontmatter and body, with JSON-safe values."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

import yaml

try:  # libyaml is an order of magnitude faster; the pure loader has the same semantics.
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - wheels ship libyaml
    _Loader = yaml.SafeLoader

# Frontmatter larger than this, or expanding into more values than this, is treated as
# broken: it protects the service from YAML alias bombs and pathological pages.
MAX_FRONTMATTER_CHARS = 64 * 1024
MAX_FRONTMATTER_VALUES = 20_000


@dataclass(frozen=True, slots=True)
class Split:
    """The result of splitting a page's text."""

    data: dict[str, Any]  # raw YAML values (dates stay date objects)
    body: str
    body_line: int  # 1-based line of the file where the body starts
    broken: bool  # a frontmatter block was present but could not be used


class _TooLarge(Exception):
    pass


def split_frontmatter(text: str) -> Split:
    """Split per the contract: a block only if the text starts with '---\\n' and a later
    '\\n---' closes it; invalid YAML keeps the whole text as the body."""
    if not text.startswith("---\n"):
        return Split({}, text, 1, False)
    end = text.find("\n---", 4)
    if end < 0:
        return Split({}, text, 1, False)
    block = text[4:end]
    body = text[end + 4 :]
    body_line = text.count("\n", 0, end + 4) + 1
    if len(block) > MAX_FRONTMATTER_CHARS:
        return Split({}, text, 1, True)
    try:
        value = yaml.load(block, Loader=_Loader)  # noqa: S506 - a safe loader
        if isinstance(value, dict):
            _count_values(value, [0])
    except (yaml.YAMLError, _TooLarge, RecursionError, ValueError, TypeError):
        return Split({}, text, 1, True)
    if not isinstance(value, dict):
        return Split({}, body, body_line, False)
    return Split(value, body, body_line, False)


def _count_values(value: Any, seen: list[int]) -> None:
    seen[0] += 1
    if seen[0] > MAX_FRONTMATTER_VALUES:
        raise _TooLarge
    if isinstance(value, dict):
        for key, item in value.items():
            _count_values(key, seen)
            _count_values(item, seen)
    elif isinstance(value, list | tuple | set):
        for item in value:
            _count_values(item, seen)


def json_safe(value: Any) -> Any:
    """Convert YAML values to JSON-mode values (dates to ISO strings, keys to strings)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dict):
        return {_key_text(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    safe = json_safe(key)
    return safe if isinstance(safe, str) else str(safe)
