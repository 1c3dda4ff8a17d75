"""JSON read with limits, so no document a peer sends can exhaust the stack, stall the loop on a
giant number, or carry a string that cannot be written back out."""

from __future__ import annotations

import json
import re
from typing import Any

# pydantic-core's own limit; no wire shape either service reads comes near it.
MAX_JSON_DEPTH = 200
# No field of either service takes a longer number; Python refuses past 4,300 digits anyway, and
# converting a long one costs quadratic time.
MAX_NUMBER_CHARS = 100
_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonRejected(ValueError):
    """Well-formed JSON that no wire shape of ours accepts; the message says why, for the client."""


class JsonTooDeep(JsonRejected):
    """The document nests arrays and objects deeper than `MAX_JSON_DEPTH`."""

    def __init__(self) -> None:
        super().__init__(f"JSON is nested deeper than {MAX_JSON_DEPTH} levels")


def _number_text(text: str) -> str:
    if len(text) > MAX_NUMBER_CHARS:
        raise JsonRejected(f"a number is longer than {MAX_NUMBER_CHARS} characters")
    return text


def _int(text: str) -> int:
    return int(_number_text(text))


def _float(text: str) -> float:
    return float(_number_text(text))


def loads_bounded(raw: str | bytes, *, surrogates: bool = False) -> Any:
    """`json.loads`, except that a document nested deeper than `MAX_JSON_DEPTH`, a number longer
    than `MAX_NUMBER_CHARS` or a string holding a lone surrogate raises `JsonRejected` (the
    standard parser itself would raise RecursionError only past ~1000 levels, and code walking the
    value could fail earlier). Other invalid JSON raises `ValueError` as `json.loads` does
    (`json.JSONDecodeError` with its position, `UnicodeDecodeError` for bytes that are not UTF-8).
    `surrogates=True` lets lone surrogates through (what a source answered is kept as it is;
    requests to our services are refused them)."""
    try:
        value = json.loads(raw, parse_int=_int, parse_float=_float)
    except RecursionError:
        raise JsonTooDeep from None
    check_value(value, surrogates=surrogates)
    return value


def check_value(value: Any, *, surrogates: bool = False) -> None:
    """Raises `JsonRejected` when an array or object in `value` lies more than `MAX_JSON_DEPTH`
    levels deep or a key or string holds a lone surrogate (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not surrogates and _SURROGATE.search(item):
                raise JsonRejected("a string holds a lone surrogate (not Unicode text)")
            continue
        if isinstance(item, dict):
            children: Any = [*item.keys(), *item.values()]
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise JsonTooDeep
        stack.extend((child, depth + 1) for child in children)

