"""JSON read with a nesting limit, so no document a peer sends can exhaust the stack later."""

from __future__ import annotations

import json
from typing import Any

# pydantic-core's own limit; no wire shape either service reads comes near it.
MAX_JSON_DEPTH = 200


class JsonTooDeep(ValueError):
    """The document nests arrays and objects deeper than `MAX_JSON_DEPTH`."""

    def __init__(self) -> None:
        super().__init__(f"JSON is nested deeper than {MAX_JSON_DEPTH} levels")


def loads_bounded(raw: str | bytes) -> Any:
    """`json.loads`, except that a document nested deeper than `MAX_JSON_DEPTH` raises
    `JsonTooDeep` (the standard parser itself would raise RecursionError only past ~1000 levels,
    and code walking the value could fail earlier). Other invalid JSON raises `ValueError` as
    `json.loads` does."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonTooDeep from None
    if not nested_within(value, MAX_JSON_DEPTH):
        raise JsonTooDeep
    return value


def nested_within(value: Any, limit: int) -> bool:
    """Whether no array or object in `value` lies more than `limit` levels deep (walked without
    recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return True
