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
        value = fast_mapping(block)
        if value is not None:
            # Flat by construction: the count _count_values would reach, without the walk.
            if 1 + sum(2 + len(v) if isinstance(v, list) else 2
                       for v in value.values()) > MAX_FRONTMATTER_VALUES:
                raise _TooLarge
        else:
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
        value = fast_mapping(block)
        if value is None:
            value = _HANDLER.load(block, Loader=_Loader)
            _count_values(value, [0])
    except (yaml.YAMLError, _TooLarge, RecursionError, TypeError) as exc:
        raise ValueError("invalid frontmatter") from exc
    return value


# -- a fast path for the frontmatter most pages have ---------------------------------------
# Flat `key: scalar`, `key: [a, b]` and `key:` + `- item` lists, with plain scalars that
# YAML 1.1 resolves to strings, decimal ints, booleans, nulls or dates. Anything else
# returns None and goes to the full YAML loader, so results are always identical to it
# (a test compares both on generated and fixture frontmatter).
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*?))?[ \t]*$")
_ITEM_LINE = re.compile(r"[ \t]*-[ \t]+(.*?)[ \t]*$")
_PLAIN_START = re.compile(r"[A-Za-z\uac00-\ud7a3/]")
# Both also refuse YAML's indicator characters anywhere in the scalar (&*!|>%@`).
_PLAIN_BAD = re.compile(r": |:$| #|[\[\]{},\t&*!|>%@`]")
_FLOW_ITEM_BAD = re.compile(r": |:$| #|[\[\]{}\"'\t&*!|>%@`]")
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)$")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})$")
_BLANK_LINE = re.compile(r"^ *$", re.MULTILINE)
_NUMBER_START = frozenset("+-0123456789")  # what _INT and _DATE can start with
_BOOLS = {w: True for w in ("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")}
_BOOLS.update({w: False for w in ("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")})
_NULLS = frozenset({"~", "null", "Null", "NULL", ""})
_FALLBACK = object()


def _scalar(text: str, *, in_flow: bool = False) -> Any:
    """Resolve one plain or simply-quoted scalar, or _FALLBACK when unsure."""
    if not text:
        return None
    first = text[0]
    if first in "\"'":
        if len(text) < 2 or text[-1] != first or "\\" in text or text.count(first) != 2:
            return _FALLBACK
        return text[1:-1]
    if text in _BOOLS:
        return _BOOLS[text]
    if text in _NULLS:
        return None
    if first in _NUMBER_START:
        if _INT.match(text):
            return int(text)
        date = _DATE.match(text)
        if date:
            try:
                return dt.date(int(date[1]), int(date[2]), int(date[3]))
            except ValueError:
                return _FALLBACK
    bad = _FLOW_ITEM_BAD if in_flow else _PLAIN_BAD
    if not _PLAIN_START.match(first) or bad.search(text):
        return _FALLBACK
    return text


def fast_mapping(block: str) -> dict[str, Any] | None:
    """Parse simple frontmatter without the YAML machinery, or None to defer to it."""
    result: dict[str, Any] = {}
    pending: str | None = None  # key whose block list is being read
    indent = ""  # the list's item indentation: every item must use the same
    # Blank lines, tabs and control characters: let YAML decide. Checked on the whole block
    # (once every character is printable, a blank line can only hold spaces).
    if "\t" in block or not block.replace("\n", "").isprintable() or _BLANK_LINE.search(block):
        return None
    for line in block.split("\n"):
        if pending is not None and line[0] in " -":
            item = _ITEM_LINE.match(line)
            if item is None:
                return None
            item_indent = line[: len(line) - len(line.lstrip(" "))]
            if not result[pending]:
                indent = item_indent
            elif item_indent != indent:
                return None
            value = _scalar(item.group(1))
            if value is _FALLBACK or not isinstance(value, str | int | bool) or value is None:
                return None
            result[pending].append(value)
            continue
        pending = None
        match = _KEY_LINE.match(line)
        if match is None:
            return None
        key, raw = match.group(1), match.group(2) or ""
        if key in _BOOLS or key in _NULLS or key == "<<" or key in result:
            return None
        if raw == "":
            result[key] = []
            pending = key
            continue
        if raw.startswith("["):
            if not raw.endswith("]"):
                return None
            inner = raw[1:-1].strip()
            items: list[Any] = []
            if inner:
                for part in inner.split(","):
                    value = _scalar(part.strip(), in_flow=True)
                    if value is _FALLBACK or value is None:
                        return None
                    items.append(value)
            result[key] = items
            continue
        value = _scalar(raw)
        if value is _FALLBACK:
            return None
        result[key] = value
    # An empty block list is YAML null, not [].
    for key, value in result.items():
        if value == [] and isinstance(value, list) and key in _empty_list_keys(block):
            result[key] = None
    return result


def _empty_list_keys(block: str) -> set[str]:
    keys = set()
    lines = block.split("\n")
    for i, line in enumerate(lines):
        match = _KEY_LINE.match(line)
        if match and not match.group(2):
            following = lines[i + 1] if i + 1 < len(lines) else ""
            if following[:1] not in (" ", "-", "\t"):
                keys.add(match.group(1))
    return keys


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
