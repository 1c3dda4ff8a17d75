"""Citations keep the lines a source cites (origin) only when they hold up, and trace refs and
prompts show them."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.config.registry import normalize_inline
from bridge.core import artifact
from bridge.core.origins import location
from bridge.core.prompt import citation_digest
from tests.support.bridge_sources import source

DIGEST = "ab" * 32
HANDLE = "llmwiki://wiki/pages/runbooks%2Frollback#steps"


def item(**origin: Any) -> dict[str, Any]:
    base = {"path": "runbooks/rollback.md", "line_start": 7, "line_end": 11, "sha256": DIGEST,
            "bundle_id": "wiki:sha256:abc"}
    return {"page_id": "runbooks/rollback", "title": "Rollback", "path": "runbooks/rollback.md",
            "snippet": "# Rollback ...", "score": 1.5,
            "section": {"handle": HANDLE, "heading_path": "Rollback > Steps", "anchor": "steps"},
            "origin": {**base, **origin}}


def citations(*items: dict[str, Any]) -> list[Any]:
    [descriptor] = normalize_inline([source("wiki", "http://127.0.0.1:1")])
    return artifact.citations_from({"evidence": list(items)}, descriptor)


def test_an_origin_is_carried_with_its_section_and_shown_in_refs_and_prompts() -> None:
    [cited] = citations(item())
    assert cited.wire()["origin"] == {"path": "runbooks/rollback.md", "lineStart": 7, "lineEnd": 11,
                                      "headingPath": "Rollback > Steps", "handle": HANDLE,
                                      "sha256": DIGEST}
    [ref] = artifact.citation_refs([cited])
    assert (ref.path, ref.line_start, ref.line_end) == ("runbooks/rollback.md", 7, 11)
    [entry] = citation_digest("rollback", [cited])
    assert entry["section"] == location(cited.origin) == "runbooks/rollback.md:7-11 (Rollback > Steps)"


@pytest.mark.parametrize("origin", [
    {"path": "/etc/passwd"}, {"path": "../outside.md"}, {"path": "a/../../b.md"},
    {"path": "C:\\wiki\\a.md"}, {"path": "file:///etc/passwd"}, {"path": ""}, {"path": 7},
    {"line_start": 0}, {"line_start": True}, {"line_end": 3}, {"line_end": "11"},
    {"line_start": 10**12, "line_end": 10**12},
])
def test_an_origin_that_does_not_hold_up_is_dropped(origin: dict[str, Any]) -> None:
    [cited] = citations(item(**origin))
    assert cited.origin is None and "origin" not in cited.wire()
    [ref] = artifact.citation_refs([cited])
    assert ref.line_start is None and ref.line_end is None


def test_untrusted_handles_and_digests_are_left_out_but_the_lines_kept() -> None:
    hostile = item(sha256="not-a-digest")
    hostile["section"] = {"handle": "https://evil.example/x", "heading_path": "A\nB\u0000C"}
    [cited] = citations(hostile)
    assert cited.origin is not None
    assert (cited.origin.handle, cited.origin.sha256) == (None, None)
    assert cited.origin.heading_path == "A B C"
    [plain] = citations({k: v for k, v in item().items() if k not in ("origin", "section")})
    assert plain.origin is None and "origin" not in plain.wire()
