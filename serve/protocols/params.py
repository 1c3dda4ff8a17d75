"""Query-string parsing with FastAPI-compatible 422 issues."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from common.booleans import parse_bool
from common.errors import ValidationFailed, issue
from common.json_read import JsonRejected, loads_bounded
from common.limits import MAX_NAMES, TooManyNames, name_list

M = TypeVar("M", bound=BaseModel)


class QueryParams:
    """Collects every problem in a query string, then raises them together."""

    def __init__(self, request: web.Request) -> None:
        self.query = request.query
        self.issues: list[dict[str, object]] = []

    def boolean(self, name: str, default: bool = False) -> bool:
        raw = self.query.get(name)
        if raw is None:
            return default
        try:
            return parse_bool(raw, letters=True)  # FastAPI's query-string rules
        except ValueError:
            self.issues.append(issue("bool_parsing", ["query", name],
                                     "Input should be a valid boolean, unable to interpret input", raw))
            return default

    def optional_boolean(self, name: str) -> bool | None:
        """A boolean, or None when absent (the default then depends on other params)."""
        if name not in self.query:
            return None
        return self.boolean(name)

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
        values = list(self.query.getall(name, []))
        if len(values) > MAX_NAMES:
            self._too_many(name)
            return []
        return values

    def fields(self, name: str = "fields") -> list[str] | None:
        """Comma-separated names (repeatable); None when absent."""
        if name not in self.query:
            return None
        try:
            return name_list(self.query.getall(name), name)
        except TooManyNames:
            self._too_many(name)
            return []

    def _too_many(self, name: str) -> None:
        self.issues.append(issue("too_long", ["query", name],
                                 f"List should have at most {MAX_NAMES} items", None,
                                 {"field_type": "List", "max_length": MAX_NAMES}))

    def check(self) -> None:
        if self.issues:
            raise ValidationFailed(self.issues)


async def read_json_body(request: web.Request) -> object:
    """The request's JSON body; invalid JSON is a 422 `json_invalid` issue at its position."""
    raw = await request.read()
    try:
        return loads_bounded(raw.decode("utf-8") if raw else "null")
    except JsonRejected as exc:
        raise ValidationFailed([issue("json_invalid", ["body", 0], "JSON decode error",
                                      {}, {"error": str(exc)})]) from None
    except UnicodeDecodeError:
        raise ValidationFailed([issue("json_invalid", ["body", 0], "JSON decode error",
                                      {}, {"error": "body is not UTF-8"})]) from None
    except json.JSONDecodeError as exc:
        raise ValidationFailed([issue("json_invalid", ["body", exc.pos], "JSON decode error",
                                      {}, {"error": exc.msg})]) from None


def model_from_body(model: type[M], body: object) -> M:
    """Validate a JSON body against a pydantic model, as FastAPI reports it (422)."""
    if body is None:
        body = {}
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        issues = []
        for error in exc.errors(include_url=False):
            ctx = error.get("ctx")
            item = issue(error["type"], ["body", *error["loc"]], error["msg"], error.get("input"),
                         {k: v if isinstance(v, str | int | float | bool) else str(v)
                          for k, v in ctx.items()} if ctx else None)
            issues.append(item)
        raise ValidationFailed(issues) from None
