"""serve's MCP tools as deployed come from one table: the installed `llmwiki-serve` lists the same
tools, with the same argument schemas, on bare /mcp, /mcp/stream, stdio (`llmwiki-serve mcp`)
and in /openapi.json, honours --mcp-exclude-tools and the configured defaults everywhere, and
reads one call's arguments leniently on bare /mcp and strictly on the stream."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import SAMPLE_WIKI
from tests.e2e.processes import START_SECONDS, Service, console_script, service_env, start_serve, stop_checked

OPTIONS = ("--mcp-exclude-tools", "llmwiki_graph", "--context-default-limit", "5")
SEVEN = ["llmwiki_context", "llmwiki_search", "llmwiki_read", "llmwiki_graph",
         "llmwiki_graph_neighbors", "llmwiki_source_refs", "llmwiki_source_bundle"]
LISTED = [name for name in SEVEN if name != "llmwiki_graph"]
STREAM_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start_serve(tmp_path_factory.mktemp("serve-tools"), SAMPLE_WIKI, *OPTIONS)
    yield service
    stop_checked(service)


def rpc(url: str, method: str, params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    response = httpx.post(url, json=body, headers=headers or {}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def stdio_replies(work: Path, *messages: dict[str, Any]) -> list[Any]:
    """`llmwiki-serve mcp ROOT` with the same options, fed these lines until stdin closes."""
    work.mkdir(parents=True, exist_ok=True)
    env = service_env(work)
    env["E2E_GUARD_LOG"] = str(work / "stdio.guard")
    lines = "".join(json.dumps({"jsonrpc": "2.0", "id": n, **m}) + "\n" for n, m in enumerate(messages))
    done = subprocess.run([str(console_script("llmwiki-serve")), "mcp", str(SAMPLE_WIKI), *OPTIONS],
                          input=lines, capture_output=True, text=True, env=env, cwd=work,
                          timeout=START_SECONDS, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (work / "stdio.guard").exists() or not (work / "stdio.guard").read_text().strip()
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_every_surface_lists_the_same_tools(serve: Service, tmp_path: Path) -> None:
    bare = rpc(f"{serve.url}/mcp", "tools/list")["result"]["tools"]
    stream = rpc(f"{serve.url}/mcp/stream", "tools/list", headers=STREAM_HEADERS)["result"]["tools"]
    [stdio] = stdio_replies(tmp_path, {"method": "tools/list"})
    assert [t["name"] for t in bare] == [t["name"] for t in stream] == LISTED
    assert stdio["result"]["tools"] == stream
    document = httpx.get(f"{serve.url}/openapi.json", timeout=60).json()
    for path in ("/mcp", "/mcp/stream"):
        documented = document["paths"][path]["post"]["x-mcp-tools"]
        assert [t["name"] for t in documented] == LISTED
    schemas = document["components"]["schemas"]
    for tool in stream:
        assert schemas[f"{tool['name']}Arguments"] == tool["inputSchema"]
    assert "llmwiki_graphArguments" not in schemas
    assert stream[1]["inputSchema"]["properties"]["limit"]["default"] == 5
    manifest = httpx.get(f"{serve.url}/manifest", timeout=60).json()
    assert manifest["capabilities"][:7] == [SEVEN[-1], *SEVEN[:-1]]  # what the build answers


def test_one_call_is_lenient_on_bare_mcp_and_strict_on_the_stream(serve: Service, tmp_path: Path) -> None:
    arguments = {"query": "rollback", "limit": "nonsense", "mode": " Literal "}
    params = {"name": "llmwiki_search", "arguments": arguments}
    bare = rpc(f"{serve.url}/mcp", "tools/call", params)["result"]
    assert 0 < len(bare["results"]) <= 5 and {r["route"] for r in bare["results"]} == {"literal"}
    stream = rpc(f"{serve.url}/mcp/stream", "tools/call", params, STREAM_HEADERS)["result"]
    assert stream["isError"] is True
    text = stream["content"][0]["text"]
    assert text.startswith("Error executing tool llmwiki_search: 2 validation error(s)")
    assert "\nlimit: " in text and "\nmode: " in text
    read = {"name": "llmwiki_read", "arguments": {"id": "hot", "fields": "id,title"}}
    assert rpc(f"{serve.url}/mcp", "tools/call", read)["result"] == {"id": "hot", "title": "Current Focus"}
    [stdio] = stdio_replies(tmp_path, {"method": "tools/call", "params": read})
    assert stdio["result"]["isError"] is True and "page_id" in stdio["result"]["content"][0]["text"]
    disabled = rpc(f"{serve.url}/mcp", "tools/call", {"name": "llmwiki_graph"})
    assert disabled["error"]["code"] == -32602 and "disabled" in disabled["error"]["message"]
