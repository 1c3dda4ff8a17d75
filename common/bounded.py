"""Trimmed, bounded strings for wire models: one Python check per string, limits in the JSON schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema


@dataclass(frozen=True)
class Trimmed:
    """`Annotated[str, Trimmed(n, ...)]`: trimmed (Python's strip), then non-empty and at most `n`
    code points, else a `kind` error with the given words (`{max_length}` may appear in them).

    One check per string: lists of them hold hundreds, and pydantic's own length checks either cost
    two more calls each or, done in Rust, refuse the lone surrogates that JSON may carry."""

    max_chars: int
    kind: str
    empty: str
    too_long: str

    def check(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value  # the `str` schema underneath names the wrong type
        value = value.strip()
        if not value or len(value) > self.max_chars:
            raise PydanticCustomError(self.kind, self.too_long if value else self.empty,
                                      {"max_length": self.max_chars})
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(schema), "minLength": 1, "maxLength": self.max_chars}
