"""Helpers shared by the bridge tests: source descriptors, the bridge client factory type and a
resolver that answers from a table."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
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


class FakeDns(AbstractResolver):
    """Answers from a table, like a DNS server an attacker controls would: one address or several
    (A and AAAA records mixed) per name."""

    def __init__(self, table: dict[str, str | list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        self.asked.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        answer = self.table[host]
        return [{"hostname": host, "host": address, "port": port,
                 "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST}
                for address in ([answer] if isinstance(answer, str) else answer)]

    async def close(self) -> None:
        return None
