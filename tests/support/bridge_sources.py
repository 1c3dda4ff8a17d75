"""Helpers shared by the bridge tests: source descriptors and the bridge client factory type."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

Client = TestClient[web.Request, web.Application]
BridgeFactory = Callable[..., Awaitable[Client]]


def source(source_id: str, url: str, **extra: Any) -> dict[str, Any]:
    """A registered/inline llmwiki-http source descriptor marked ready."""
    return {"id": source_id, "name": source_id.replace("-", " ").title(), "protocol": "llmwiki-http",
            "status": "ready", "url": url, **extra}
