"""Request limits: each range written once, for the request models, the lenient MCP-style
arguments, the CLI, the settings and the descriptions. serve's (serve contract 4.8, 4.11, 4.12,
6.1) first, then the bridge's retrieval intent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Limit:
    """An inclusive integer range a request value is clamped to (or, strictly, checked against)."""

    low: int
    high: int

    def clamp(self, value: int) -> int:
        return max(self.low, min(self.high, value))

    def contains(self, value: int) -> bool:
        return self.low <= value <= self.high

    @property
    def span(self) -> str:
        return f"{self.low}..{self.high}"


SEARCH_LIMIT = Limit(1, 30)  # evidence items / search results
SNIPPET_CHARS = Limit(0, 2000)
GRAPH_LIMIT = Limit(1, 2000)  # nodes of /graph
CONTEXT_GRAPH_LIMIT = Limit(0, 2000)  # nodes of a context pack's graph (0: none)
NEIGHBORHOOD_DEPTH = Limit(0, 4)
NEIGHBORHOOD_LIMIT = Limit(1, 500)
READ_MAX_CHARS = Limit(200, 1_000_000)
DEFAULT_NEIGHBORHOOD_DEPTH = 1
DEFAULT_NEIGHBORHOOD_LIMIT = 50

# The bridge's retrieval intent (bridge contract 3.5) and its source tools' context limit.
INTENT_LIMIT = Limit(1, 50)
INTENT_SNIPPET_CHARS = Limit(1, 20000)


# Entries of one name list in a request (`fields`, `exclude_page_ids`, seeds, relations, sections):
# far above what any client sends, low enough that the work on a list stays small.
MAX_NAMES = 10_000


class TooManyNames(ValueError):
    def __init__(self, field: str) -> None:
        super().__init__(f"{field} accepts at most {MAX_NAMES} names")


def name_list(value: Any, field: str, *, stringify: bool = False) -> list[str]:
    """A comma-separated string or a list of them: trimmed, empties dropped, de-duplicated in
    order. Entries that are not strings are skipped, or written as strings with `stringify`
    (the lenient MCP-style arguments). Raises `TooManyNames` past `MAX_NAMES`."""
    if value is None:
        return []
    if isinstance(value, str):
        items: list[Any] | tuple[Any, ...] = [value]
    elif isinstance(value, list | tuple):
        items = value
    else:
        items = [value] if stringify else []
    if len(items) > MAX_NAMES:
        raise TooManyNames(field)
    names: dict[str, None] = {}
    for item in items:
        if not isinstance(item, str):
            if not stringify:
                continue
            item = str(item)
        for part in item.split(","):
            part = part.strip()
            if part:
                names[part] = None
        if len(names) > MAX_NAMES:
            raise TooManyNames(field)
    return list(names)
