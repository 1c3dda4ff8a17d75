"""The installed `llmwiki-serve` cites evidence to the line the same way over every protocol: HTTP,
MCP (/mcp, /mcp/stream, stdio) and A2A give each evidence item the same section, origin, matched
fields and passage; the cited lines are the file's on disk; handles read back the same section
over HTTP, MCP and stdio, and unknown or withheld handles answer like unknown or withheld pages."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.e2e.hostile import SAMPLE_WIKI, LineReader, call, post_json
from tests.e2e.processes import Service, console_script, service_env, start_serve, stop_checked

QUESTION = "How do we roll back a release?"
STREAM_HEADERS = {"accept": "application/json, text/event-stream",
                  "mcp-protocol-version": "2025-06-18"}
SECTION_KEYS = ("page_id", "section", "origin", "matched_fields", "passage")
DRAFT_PAGE = "runbooks/incident-comms"  # a draft in the sample wiki


@pytest.fixture(scope="module")
def wiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sections") / "wiki"
    shutil.copytree(SAMPLE_WIKI, root)
    return root


@pytest.fixture(scope="module")
def served(wiki: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start_serve(tmp_path_factory.mktemp("run"), wiki, "--enable-a2a")
    yield service
    stop_checked(service)


@pytest.fixture(scope="module")
def stdio(wiki: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`llmwiki-serve mcp ROOT` with pipes, as an MCP client launches it: a call function."""
    work = tmp_path_factory.mktemp("stdio")
    with (work / "stderr").open("wb") as stderr:
        process = subprocess.Popen([str(console_script("llmwiki-serve")), "mcp", str(wiki)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                   env=service_env(work / "run"), cwd=work)
    reader = LineReader(process)
    counter = iter(range(1, 1000))

    def tool(name: str, arguments: dict[str, Any]) -> Any:
        assert process.stdin is not None
        request = {"jsonrpc": "2.0", "id": next(counter), "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}}
        process.stdin.write(json.dumps(request).encode() + b"\n")
        process.stdin.flush()
        return structured(reader.next_json())

    yield tool
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait(30) == 0


def structured(reply: dict[str, Any]) -> Any:
    """A tool call's value: MCP's structuredContent, or the bare result POST /mcp answers a
    client that is not MCP (the reference's JSON-RPC shape)."""
    result = reply["result"]
    if "structuredContent" not in result:
        return result
    assert result["isError"] is False, result
    return result["structuredContent"]


def mcp_tool(base: str, path: str, name: str, arguments: dict[str, Any]) -> Any:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}}).encode()
    answer = call(base, "POST", path, body, headers=STREAM_HEADERS if "stream" in path else None)
    assert answer.status == 200, answer.body[:300]
    return structured(answer.json())


def cited(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(json.dumps(item.get(key), sort_keys=True) for key in SECTION_KEYS) for item in items]


def file_lines(root: Path, origin: dict[str, Any]) -> bytes:
    lines = (root / origin["path"]).read_bytes().split(b"\n")
    chunk = b"\n".join(lines[origin["line_start"] - 1:origin["line_end"]])
    return chunk + b"\n" if origin["line_end"] < len(lines) else chunk


def test_every_protocol_cites_the_same_lines(served: Service, stdio: Any, wiki: Path) -> None:
    answer = post_json(served.url, "/query", {"query": QUESTION})
    assert answer.status == 200, answer.body[:300]
    pack = answer.json()
    evidence = pack["evidence"]
    assert evidence and pack["evidence"][0]["page_id"] == "runbooks/rollback"
    # Without the snippet, every item gives its passage; with it, a passage the snippet
    # holds is left out.
    bare = post_json(served.url, "/query", {"query": QUESTION, "fields": ["origin", "passage"]})
    passages = [item["passage"] for item in bare.json()["evidence"]]
    assert len(passages) == len(evidence)
    for item, passage in zip(evidence, passages, strict=True):
        origin = item["origin"]
        chunk = file_lines(wiki, origin)
        assert hashlib.sha256(chunk).hexdigest() == origin["sha256"]
        text = chunk.decode()
        assert all(word.removesuffix("...") in text for word in passage.split())
        held = passage.removesuffix("...") in item["snippet"]
        assert item.get("passage") == (None if held else passage)
        assert list(item["section"]) == ["handle", "heading_path", "anchor"]
        assert item["snippet"] and set(item["matched_fields"]) <= {
            "title", "heading", "body", "tag", "path", "alias"}
    assert any("passage" not in item for item in evidence)  # the rollback page's first section
    expected = cited(evidence)
    assert cited(mcp_tool(served.url, "/mcp", "llmwiki_context", {"query": QUESTION})["evidence"]) == expected
    assert cited(mcp_tool(served.url, "/mcp/stream", "llmwiki_context",
                          {"query": QUESTION})["evidence"]) == expected
    assert cited(stdio("llmwiki_context", {"query": QUESTION})["evidence"]) == expected
    a2a = post_json(served.url, "/message:send", {"data": {"query": QUESTION}})
    assert a2a.status == 200, a2a.body[:300]
    assert cited(a2a.json()["artifacts"][0]["parts"][0]["data"]["evidence"]) == expected
    # Search results carry the same fields, alike over HTTP and MCP.
    found = post_json(served.url, "/search", {"query": QUESTION}).json()["results"]
    assert cited(found) == cited(mcp_tool(served.url, "/mcp", "llmwiki_search",
                                          {"query": QUESTION})["results"])
    assert cited(found) == cited(stdio("llmwiki_search", {"query": QUESTION})["results"])


def test_handles_read_back_the_section_over_every_protocol(served: Service, stdio: Any,
                                                           wiki: Path) -> None:
    pack = post_json(served.url, "/query", {"query": QUESTION}).json()
    item = pack["evidence"][0]
    handle = item["section"]["handle"]
    answer = call(served.url, "GET", "/read/" + quote(handle, safe=""))
    assert answer.status == 200, answer.body[:300]
    section = answer.json()
    assert section["handle"] == handle and section["origin"] == item["origin"]
    assert section["heading_path"] == item["section"]["heading_path"]
    assert section["text"].strip() in file_lines(wiki, section["origin"]).decode()
    assert mcp_tool(served.url, "/mcp", "llmwiki_read", {"page_id": handle}) == section
    assert mcp_tool(served.url, "/mcp/stream", "llmwiki_read", {"page_id": handle}) == section
    assert stdio("llmwiki_read", {"page_id": handle}) == section
    page_handle = handle.partition("#")[0]
    whole = call(served.url, "GET", "/read/" + quote(page_handle, safe="")).json()
    assert whole["level"] == -1 and handle in [s["handle"] for s in whole["sections"]]
    assert section["neighbours"]["parent"] is not None

    # Unknown and withheld handles answer as unknown and withheld pages do.
    source_id = handle[len("llmwiki://"):].partition("/")[0]
    missing_page = call(served.url, "GET", "/read/no-such-page")
    withheld_page = call(served.url, "GET", "/read/" + quote(DRAFT_PAGE, safe=""))
    assert (missing_page.status, withheld_page.status) == (404, 200)
    draft = f"llmwiki://{source_id}/pages/{quote(DRAFT_PAGE, safe='')}"
    for unknown in (handle + "-no-such-anchor", f"llmwiki://elsewhere/pages/{quote(DRAFT_PAGE, safe='')}"):
        answer = call(served.url, "GET", "/read/" + quote(unknown, safe=""))
        assert (answer.status, answer.body) == (404, missing_page.body)
        assert mcp_tool(served.url, "/mcp", "llmwiki_read", {"page_id": unknown}) == {"found": False}
    for withheld in (draft, draft + "#no-such-anchor"):
        answer = call(served.url, "GET", "/read/" + quote(withheld, safe=""))
        assert (answer.status, answer.body) == (200, withheld_page.body)
        assert stdio("llmwiki_read", {"page_id": withheld}) == json.loads(withheld_page.body)


def test_source_bundle_reports_raw_origins_as_metadata(served: Service, wiki: Path) -> None:
    bundle = call(served.url, "GET", "/source-bundle").json()
    origins = bundle["raw_origins"]
    assert origins["enabled"] is True and origins["metadata_only"] is True
    assert origins["root_label"] == bundle["source_id"] and "commit" not in origins
    assert str(wiki) not in json.dumps(bundle)


def test_an_explicit_heading_id_is_the_anchor_and_its_handle_reads_back(tmp_path: Path) -> None:
    root = tmp_path / "wiki"
    shutil.copytree(SAMPLE_WIKI, root)
    (root / "runbooks" / "mdx-ids.md").write_text(
        "---\ntitle: Naming Handlers\nstatus: approved\n---\n# Naming Handlers\n\n"
        "## Naming event handler props {/*naming-event-handler-props*/}\n\n"
        "Call the quokkaprop handler prop onSomething.\n\n"
        "## Pandoc style {#pandoc-style}\n\nAnother quokkaprop line.\n", encoding="utf-8")
    service = start_serve(tmp_path / "run", root)
    try:
        pack = post_json(service.url, "/query", {"query": "quokkaprop handler prop"}).json()
        item = next(i for i in pack["evidence"] if i["page_id"] == "runbooks/mdx-ids")
        section = item["section"]
        assert section["anchor"] == "naming-event-handler-props"
        assert section["heading_path"] == "Naming Handlers > Naming event handler props"
        assert section["handle"].endswith("#naming-event-handler-props")
        answer = call(service.url, "GET", "/read/" + quote(section["handle"], safe=""))
        assert answer.status == 200, answer.body[:300]
        read = answer.json()
        assert read["anchor"] == "naming-event-handler-props"
        assert "quokkaprop handler prop" in read["text"]
        whole = call(service.url, "GET", "/read/" + quote(section["handle"].partition("#")[0], safe=""))
        assert [s["anchor"] for s in whole.json()["sections"]] == [
            "naming-handlers", "naming-event-handler-props", "pandoc-style"]
    finally:
        stop_checked(service)
