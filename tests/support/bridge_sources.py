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


def observations(diagnostic: dict[str, Any]) -> dict[str, str]:
    """A diagnostic's observations as a name -> value mapping."""
    return {o["name"]: o["value"] for o in diagnostic["observations"]}


def expected_detail(pack: dict[str, Any], title: str) -> str:
    """The tool step detail contract 4.4 gives for a pack (previews are `path (title)`)."""
    detail = f"Read {len(pack['evidence'])} citation(s) from {title}."
    if pack["orientation"]:
        detail += " Orientation: " + "; ".join(f"{o['path']} ({o['title']})"
                                               for o in pack["orientation"][:3]) + "."
    previews = [f"{e['path']} ({e['title']})" for e in pack["evidence"]]
    if previews:
        more = f"; +{len(previews) - 3} more" if len(previews) > 3 else ""
        detail += " Evidence: " + "; ".join(previews[:3]) + more + "."
    return detail if len(detail) <= 360 else detail[:357] + "..."


def expected_citations(pack: dict[str, Any], source_id: str) -> list[tuple[str, str, str, list[str]]]:
    """(id, title, path, source refs) of the citations a serve context pack should become."""
    return [(f"{source_id}:{e['page_id']}", e["title"], e["path"], e["source_refs"])
            for e in pack["evidence"]]
