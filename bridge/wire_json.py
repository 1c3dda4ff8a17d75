"""The bridge's answers as JSON, with parts already written (while slower sources were still
working) spliced in rather than written again at the end of the run."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pydantic_core
from aiohttp import web
from pydantic_core import PydanticSerializationError

from common.errors import json_body

# A placeholder's text holds a random token, so no value of a run can spell it by chance; a
# placeholder found anywhere but once still falls back to writing everything.
_TOKEN = f"\x00llmwiki-written-{uuid.uuid4().hex}-"
# How deep answers nest an artifact's data (JSON-RPC result, task, artifacts, parts, data, graph).
_MAX_DEPTH = 8


class WrittenDict(dict[str, Any]):
    """A dict to every reader that also carries its compact JSON (`json_parts`, joined), written by
    the same writer as `common.errors.json_body` when its items were made. Whoever builds one must
    not change the items afterwards."""

    __slots__ = ("json_parts",)

    def __init__(self, items: dict[str, Any], json_parts: Sequence[bytes | memoryview]) -> None:
        super().__init__(items)
        self.json_parts = json_parts


def answer_body(payload: Any) -> bytes:
    """Byte for byte `json_body(payload)`; a `WrittenDict` reached through dicts and short lists
    (an answer's envelopes) is not written again."""
    found: list[tuple[dict[str, Any] | list[Any], Any, WrittenDict]] = []
    _find_written(payload, found, 0)
    if not found:
        return json_body(payload)
    for index, (container, key, _written) in enumerate(found):
        container[key] = _TOKEN + str(index)
    try:
        body = pydantic_core.to_json(payload, inf_nan_mode="constants")
    except PydanticSerializationError:  # a lone surrogate elsewhere: json_body's own fallback
        body = b""
    finally:
        for container, key, written in found:
            container[key] = written
    if not body:
        return json_body(payload)
    view = memoryview(body)
    pieces: list[bytes | memoryview] = []
    at = 0
    for index, (_container, _key, written) in enumerate(found):
        placeholder = pydantic_core.to_json(_TOKEN + str(index))
        start = body.find(placeholder, at)
        if start < 0 or body.find(placeholder, start + len(placeholder)) >= 0:
            return json_body(payload)
        pieces.append(view[at:start])
        pieces.extend(written.json_parts)
        at = start + len(placeholder)
    pieces.append(view[at:])
    return b"".join(pieces)


def _find_written(value: Any, found: list[tuple[dict[str, Any] | list[Any], Any, WrittenDict]],
                  depth: int) -> None:
    """Written dicts in the order the writer meets them: through dicts and lists of at most two items
    (an answer's envelopes), not through long lists (steps, citations), which hold none."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list) and len(value) <= 2:
        items = enumerate(value)
    else:
        return
    for key, item in items:
        if type(item) is WrittenDict:
            found.append((value, key, item))
        elif isinstance(item, (dict, list)):
            _find_written(item, found, depth + 1)


def answer_response(payload: Any, status: int = 200) -> web.Response:
    """`common.errors.json_response` for the bridge's run answers."""
    return web.Response(body=answer_body(payload), status=status, content_type="application/json",
                        charset="utf-8")
