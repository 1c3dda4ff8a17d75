"""Reading a bridge result's citations in e2e tests (no product imports)."""

from __future__ import annotations

from typing import Any


def named_sources(citations: list[dict[str, Any]]) -> set[str]:
    """The sources the citations name: a page several sources hold is one citation, which
    names the others in `alsoIn`."""
    merged = {a["sourceId"] for c in citations for a in c.get("alsoIn", [])}
    return {c["sourceId"] for c in citations} | merged
