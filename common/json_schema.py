"""JSON schemas of wire models as tool listings carry them: self-contained, camelCase, no noise."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

JsonObject = dict[str, Any]


def tool_schema(model: type[BaseModel]) -> JsonObject:
    """`model`'s JSON schema by alias, made to sit inside another schema: `$defs` inlined (a `$ref`
    resolves against the document root, which is the tool's schema, not this one), generated titles
    dropped, and an optional field shown as its type (null is the same as leaving it out)."""
    schema = model.model_json_schema(by_alias=True)
    defs: JsonObject = schema.pop("$defs", {})

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = dict(node)
        branches = node.get("anyOf")
        if isinstance(branches, list) and {"type": "null"} in branches and "default" in node \
                and node["default"] is None:
            rest = [branch for branch in branches if branch != {"type": "null"}]
            del node["anyOf"], node["default"]
            node = {**(rest[0] if len(rest) == 1 else {"anyOf": rest}), **node}
        if "$ref" in node:
            node = {**defs[node.pop("$ref").rsplit("/", 1)[-1]], **node}
        node.pop("title", None)
        return {key: ({name: clean(sub) for name, sub in value.items()} if key == "properties"
                      else clean(value)) for key, value in node.items()}

    cleaned: JsonObject = clean(schema)
    return cleaned
