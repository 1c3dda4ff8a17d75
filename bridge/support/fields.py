"""Reading loosely typed JSON from sources: the text of a value, the first present key, objects, lists."""

from __future__ import annotations

from typing import Any


def text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return ""


def as_object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def first(raw: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if raw.get(key) not in (None, ""):
            return raw[key]
    return None


def first_str(raw: dict[str, Any], *keys: str) -> str:
    """`text_of(first(raw, *keys))` in one pass."""
    for key in keys:
        value = raw.get(key)
        if value is not None and value != "":
            return value if type(value) is str else text_of(value)
    return ""


def source_refs(item: dict[str, Any]) -> list[str]:
    """An item's `sourceRefs` (or `source_refs`) as strings; anything but strings and ints dropped."""
    refs = first(item, "sourceRefs", "source_refs")
    return [str(r) for r in refs if isinstance(r, (str, int))] if isinstance(refs, list) else []
