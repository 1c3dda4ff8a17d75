"""Reading the optional graph sidecar (graph/graph.json) into typed edge facts."""

from __future__ import annotations

import json
from typing import NamedTuple


class SidecarEdge(NamedTuple):
    source: str
    target: str
    type: str
    confidence: float | int | None


def parse_sidecar(text: str) -> list[SidecarEdge]:
    """Edges from graph.json text; unparseable JSON yields nothing (ignored silently)."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    items = data.get("edges") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return []
    edges = []
    for item in items:
        if not isinstance(item, dict):
            continue
        source = item["from"] if "from" in item else item.get("source")
        target = item["to"] if "to" in item else item.get("target")
        if not isinstance(source, str | int | float) or not isinstance(target, str | int | float):
            continue
        source, target = str(source).strip(), str(target).strip()
        if not source or not target:
            continue
        kind = item.get("type")
        confidence = item.get("confidence")
        if isinstance(confidence, bool) or not isinstance(confidence, int | float):
            confidence = None
        edges.append(SidecarEdge(source, target, str(kind) if kind is not None else "", confidence))
    return edges
