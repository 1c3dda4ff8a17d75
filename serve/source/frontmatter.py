"""Splitting a page into YAML frontmatter and body, with JSON-safe values."""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler

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


# The contract's delimiters: '---\n' at the very start, and the first later '\n---' (even
# when more follows on that line). python-frontmatter splits on them and loads the YAML;
# the size and value-count limits stay ours (it has none).
_HANDLER = YAMLHandler(fm_boundary=re.compile(r"\A---\n|\n---"))


def split_block(text: str) -> tuple[str, str] | None:
    """(block, body) when the text starts with a closed frontmatter block, else None."""
    if not text.startswith("---\n"):
        return None
    try:
        block, body = _HANDLER.split(text)
    except ValueError:  # not closed
        return None
    return block, body


def split_frontmatter(text: str) -> Split:
    """Split per the contract: a block only if the text starts with '---\\n' and a later
    '\\n---' closes it; invalid YAML keeps the whole text as the body."""
    parts = split_block(text)
    if parts is None:
        return Split({}, text, 1, False)
    block, body = parts
    body_line = block.count("\n") + 3  # the opening line, the block's lines, the closing one
    if len(block) > MAX_FRONTMATTER_CHARS:
        return Split({}, text, 1, True)
    try:
        value = _HANDLER.load(block, Loader=_Loader)
        if isinstance(value, dict):
            _count_values(value, [0])
    except (yaml.YAMLError, _TooLarge, RecursionError, ValueError, TypeError):
        return Split({}, text, 1, True)
    if not isinstance(value, dict):
        return Split({}, body, body_line, False)
    return Split(value, body, body_line, False)


def load_block(block: str) -> Any:
    """The YAML value of a frontmatter block, under split_frontmatter's limits; raises
    ValueError when it is invalid or too large (strict profiles reject such pages)."""
    if len(block) > MAX_FRONTMATTER_CHARS:
        raise ValueError("frontmatter too large")
    try:
        value = _HANDLER.load(block, Loader=_Loader)
        _count_values(value, [0])
    except (yaml.YAMLError, _TooLarge, RecursionError, TypeError) as exc:
        raise ValueError("invalid frontmatter") from exc
    return value


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
