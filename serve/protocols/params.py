"""Query-string parsing with FastAPI-compatible 422 issues."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from common.errors import ValidationFailed, issue

TRUE_VALUES = frozenset({"true", "1", "yes", "on", "y", "t"})
FALSE_VALUES = frozenset({"false", "0", "no", "off", "n", "f"})


class QueryParams:
    """Collects every problem in a query string, then raises them together."""

    def __init__(self, request: web.Request) -> None:
        self.query = request.query
        self.issues: list[dict[str, object]] = []

    def boolean(self, name: str, default: bool = False) -> bool:
        raw = self.query.get(name)
        if raw is None:
            return default
        lowered = raw.strip().lower()
        if lowered in TRUE_VALUES:
            return True
        if lowered in FALSE_VALUES:
            return False
        self.issues.append(issue("bool_parsing", ["query", name],
                                 "Input should be a valid boolean, unable to interpret input", raw))
        return default

    def integer(self, name: str, default: int | None) -> int | None:
        raw = self.query.get(name)
        if raw is None:
            return default
        try:
            return int(raw.strip())
        except ValueError:
            self.issues.append(issue("int_parsing", ["query", name],
                                     "Input should be a valid integer, unable to parse string as an integer",
                                     raw))
            return default

    def choice(self, name: str, choices: Sequence[str], default: str) -> str:
        raw = self.query.get(name)
        if raw is None:
            return default
        if raw in choices:
            return raw
        expected = ", ".join(f"'{c}'" for c in choices[:-1]) + f" or '{choices[-1]}'"
        self.issues.append(issue("literal_error", ["query", name], f"Input should be {expected}",
                                 raw, {"expected": expected}))
        return default

    def repeated(self, name: str) -> list[str]:
        return list(self.query.getall(name, []))

    def fields(self, name: str = "fields") -> list[str] | None:
        """Comma-separated names (repeatable); None when absent."""
        if name not in self.query:
            return None
        names: list[str] = []
        for raw in self.query.getall(name):
            for item in raw.split(","):
                item = item.strip()
                if item and item not in names:
                    names.append(item)
        return names

    def check(self) -> None:
        if self.issues:
            raise ValidationFailed(self.issues)
