"""`POST /message:send` against our own serve: request forms, the artifact, failures and policy."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from common.errors import json_bytes
from tests.support.bridge_sources import BridgeFactory, Client, source

QUESTION = "How do we ship a hotfix release?"


async def send(client: Client, body: Any, status: int = 200, **headers: str) -> dict[str, Any]:
    response = await client.post("/message:send", json=body, headers=headers)
    payload: dict[str, Any] = await response.json()
    assert response.status == status, payload
    return payload


def result_of(task: dict[str, Any]) -> dict[str, Any]:
    [artifact] = task["artifacts"]
    assert artifact["name"] == "llmwiki_agent_result"
    [part] = artifact["parts"]
    assert part["kind"] == "data"
    data: dict[str, Any] = part["data"]
    return data


async def test_evidence_only_artifact_shape(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await bridge_client()
    task = await send(client, {"data": {"query": QUESTION, "orchestrationMode": "evidence-only",
                                        "knowledgeSources": [source("sample-wiki", serve_url)]}},
                      **{"X-Request-Id": "req-42", "X-Trace-Id": "trace-42"})
    assert task["requestId"] == "req-42" and task["traceId"] == "trace-42"
    assert task["status"]["state"] == "completed"
    result = result_of(task)
    answer = result["answer"]
    assert task["status"]["message"]["parts"] == [{"kind": "text", "text": answer}]
    assert task["message"] == {"role": "agent", "parts": [{"kind": "text", "text": answer}]}
    assert set(result) == {"requestId", "traceId", "answer", "orchestrationMode", "citations", "graph",
                           "steps", "sourceBundles", "diagnostics"}
    assert result["requestId"] == "req-42" and result["traceId"] == "trace-42"
    assert result["orchestrationMode"] == "evidence-only"
    assert result["diagnostics"] == []

    citations = result["citations"]
    assert citations and len({c["id"] for c in citations}) == len(citations)
    first = citations[0]
    assert set(first) >= {"id", "sourceId", "pageId", "title", "path", "score", "snippet",
                          "connectionId", "sourceRefs"}
    assert first["id"] == f"sample-wiki:{first['pageId']}"
    assert first["sourceId"] == "sample-wiki" and first["connectionId"] == "sample-wiki"
    assert any(c["pageId"] == "runbooks/hotfix-release" for c in citations)
    assert all("#" not in c["snippet"][:2] for c in citations)

    nodes = result["graph"]["nodes"]
    assert nodes and all(n["id"].startswith("sample-wiki:") for n in nodes)
    assert all(n["metadata"]["connectionId"] == "sample-wiki" for n in nodes)

    [bundle] = result["sourceBundles"]
    assert bundle["connectionId"] == "sample-wiki"
    assert bundle["sourceId"] == "sample-operations-wiki"
    assert bundle["bundleId"].startswith("sample-operations-wiki:sha256:")
    assert bundle["projection"]["pageCount"] == 14
    assert "linked_pages" not in json.dumps(bundle) and "locator" not in json.dumps(bundle)

    steps = result["steps"]
    assert [s["id"] for s in steps] == ["bridge-plan", "tool-sample_wiki", "source-manifest-sample_wiki",
                                        "bridge-evidence", "bridge-evidence-only-answer",
                                        "bridge-final-answer"]
    assert all(s["status"] == "done" and s["timestamp"] for s in steps)
    tool = steps[1]
    assert tool["toolName"] == "llmwiki_context__sample_wiki" and tool["parentId"] == "bridge-plan"
    assert tool["connectionId"] == "sample-wiki"
    assert tool["citationIds"] == [c["id"] for c in citations]
    assert 0 < len(tool["citationRefs"]) <= 5
    assert tool["detail"].startswith(f"Read {len(citations)} citation(s) from Sample Operations Wiki.")
    assert "Evidence: " in tool["detail"] and "Orientation: " in tool["detail"]
    assert steps[2]["parentId"] == "tool-sample_wiki"
    assert steps[2]["detail"] == "Read safe source bundle metadata."

    lines = answer.split("\n")
    assert lines[0] == (f"Evidence-only result: the bridge gathered {len(citations)} citation(s) from 1 "
                        "Knowledge Source(s) and did not call the configured runtime.")
    assert lines[1].startswith("Graph: ")
    assert lines[2].startswith("Source bundles: sample-operations-wiki:sha256:")
    assert lines[3:5] == ["", "Citations:"]
    assert lines[5] == f"- {citations[0]['id']}: {citations[0]['title']}"  # no anchors (contract 4.6)
    assert "Source failures" not in answer


async def test_request_forms(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await bridge_client()
    await client.put("/settings/sources.json", json=[source("sample-wiki", serve_url)])
    forms = [
        {"data": {"query": QUESTION, "mode": "evidence-only"}},
        {"query": QUESTION, "orchestrationMode": "evidence-only"},
        {"orchestrationMode": "evidence-only",
         "message": {"role": "user", "parts": [{"kind": "text", "text": QUESTION}]}},
        {"data": {"orchestrationMode": "evidence-only",
                  "message": {"role": "USER", "messageId": "m1",
                              "parts": [{"text": "How do we ship"}, {"kind": "data", "data": {}},
                                        {"kind": "text", "text": "a hotfix release?"}]}}},
    ]
    ids = []
    for body in forms:
        result = result_of(await send(client, body))
        assert result["citations"], body
        ids.append([c["id"] for c in result["citations"]])
    assert ids[0] == ids[1] == ids[2]


async def test_request_validation(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    cases = [
        ([1, 2], "bad_request", "A2A request body must be a JSON object."),
        ({"data": {"query": "  "}}, "bad_request", "A2A request data.query or message text is required."),
        ({"message": {"role": "system", "parts": [{"kind": "text", "text": "hi"}]}}, "bad_request",
         "A2A request data.query or message text is required."),
        ({"query": "x", "mode": "turbo"}, "bad_request",
         "orchestrationMode must be one of: evidence-only, delegated-runtime, hybrid."),
        ({"query": "x", "retrieval": {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical",
                                      "embedding": [0.1]}}, "invalid_retrieval_intent", None),
        ({"query": "x", "retrieval": {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "vector",
                                      "search": {"queryVariants": ["y"]}}}, "invalid_retrieval_intent",
         None),
        ({"query": "x", "retrieval": {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical",
                                      "search": {"snippet_chars": 5}}}, "invalid_retrieval_intent", None),
    ]
    for body, code, message in cases:
        payload = await send(client, body, status=400)
        assert payload["error"]["code"] == code, body
        if message:
            assert payload["error"]["message"] == message
        assert payload["requestId"] and payload["traceId"]


async def test_inline_empty_list_means_no_sources(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await bridge_client()
    await client.put("/settings/sources.json", json=[source("sample-wiki", serve_url)])
    result = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only",
                                           "knowledgeSources": []}))
    assert result["citations"] == [] and result["sourceBundles"] == []
    assert [s["id"] for s in result["steps"]] == ["bridge-plan", "bridge-evidence",
                                                  "bridge-evidence-only-answer", "bridge-final-answer"]
    assert "Citations: none returned by selected Knowledge Sources." in result["answer"]


async def test_selection_rules(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await bridge_client()
    inline = [
        source("off", serve_url, selected=False),
        {"id": "unknown-status", "url": serve_url},  # inline sources default to status unknown
        source("stale", serve_url, status="offline"),
        source("nourl", ""),
        source("weird", serve_url, protocol="gopher"),
        source("used", serve_url),
    ]
    result = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only",
                                           "knowledgeSources": inline}))
    tools = [s["id"] for s in result["steps"] if s["id"].startswith("tool-")]
    assert tools == ["tool-used"]
    assert {c["sourceId"] for c in result["citations"]} == {"used"}


async def test_two_sources_one_down_keeps_order_and_reports(bridge_client: BridgeFactory, serve_url: str,
                                                            dead_url: str) -> None:
    client = await bridge_client()
    inline = [source("down", dead_url + "/private"), source("sample-wiki", serve_url),
              source("again", serve_url + "/")]
    result = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only",
                                           "knowledgeSources": inline, "citationOrder": "source"}))
    steps = {s["id"]: s for s in result["steps"]}
    assert [s["id"] for s in result["steps"]] == [
        "bridge-plan", "tool-down", "source-manifest-down", "tool-sample_wiki",
        "source-manifest-sample_wiki", "tool-again", "source-manifest-again", "bridge-evidence",
        "bridge-evidence-only-answer", "bridge-final-answer"]
    down = steps["tool-down"]
    assert down["status"] == "error" and down["error"] == "Source query failed."
    assert down["detail"] == "Down could not be queried by the bridge."
    assert steps["source-manifest-down"]["status"] == "error"
    # the bundle warning of a source whose query failed is replaced by the query diagnostic
    [diagnostic] = result["diagnostics"]
    assert diagnostic == down["diagnostic"]
    assert diagnostic["schemaVersion"] == "llmwiki.agent-bridge.diagnostic.v1"
    assert diagnostic["severity"] == "error" and diagnostic["scope"] == "source"
    assert diagnostic["phase"] == "query" and diagnostic["protocol"] == "llmwiki-http"
    assert diagnostic["subject"] == "down" and diagnostic["retryable"] is True
    assert diagnostic["redacted"] is True
    observations = {o["name"]: o["value"] for o in diagnostic["observations"]}
    assert observations["sourcePolicy"] == "private-http" and observations["timeoutMs"] == "120000"
    source_ids = [c["sourceId"] for c in result["citations"]]
    assert source_ids == sorted(source_ids, key=["sample-wiki", "again"].index)
    assert "again" in source_ids and "sample-wiki" in source_ids
    # By default the same wiki served twice is one citation per page, naming both sources.
    fused = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only",
                                          "knowledgeSources": inline}))["citations"]
    assert {c["sourceId"] for c in fused} == {"sample-wiki"}
    assert [a["id"] for c in fused for a in c["alsoIn"]] == [
        c["id"] for c in result["citations"] if c["sourceId"] == "again"]
    nodes = [n["id"].split(":")[0] for n in result["graph"]["nodes"]]
    assert nodes == sorted(nodes, key=["sample-wiki", "again"].index)
    assert [b["connectionId"] for b in result["sourceBundles"]] == ["sample-wiki", "again"]
    assert result["answer"].endswith("Source failures: 1 selected source(s) could not be queried. "
                                     "See trace steps for redacted details.")
    assert "from 2 Knowledge Source(s)" in result["answer"]
    text = json.dumps(result)
    assert dead_url not in text and "/private" not in text and QUESTION not in text


async def test_every_source_failed(bridge_client: BridgeFactory, dead_url: str) -> None:
    client = await bridge_client()
    inline = [source("down", dead_url)]
    evidence_only = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only",
                                                  "knowledgeSources": inline}))
    assert "Citations: none returned" in evidence_only["answer"]
    failed_closed = await send(client, {"query": QUESTION, "knowledgeSources": inline})
    result = result_of(failed_closed)
    assert result["orchestrationMode"] == "delegated-runtime"
    assert result["answer"].split("\n") == [
        "Source readiness diagnostic: 1 selected Knowledge Source(s) could not be queried.",
        "Persisted ready status is treated as last-known only until a live source query succeeds.",
        "The bridge did not call the configured runtime because no selected Knowledge Source returned "
        "evidence.",
        "See trace steps and diagnostics for redacted source failure details."]
    assert [s["id"] for s in result["steps"]][-2:] == ["bridge-source-fail-closed", "bridge-final-answer"]
    assert len(result["diagnostics"]) == 1


async def test_unreachable_runtime_is_a_502_with_the_trace(bridge_client: BridgeFactory, serve_url: str,
                                                          dead_url: str) -> None:
    client = await bridge_client(base_url=f"{dead_url}/v1")
    payload = await send(client, {"query": QUESTION, "mode": "hybrid",
                                  "knowledgeSources": [source("wiki", serve_url)]}, status=502)
    assert payload["error"]["code"] == "chat_completions_failed"
    assert payload["steps"][0]["id"] == "bridge-plan"
    assert payload["steps"][-1]["id"] == "runtime-chat-completions"


async def test_source_errors_become_steps(bridge_client: BridgeFactory, aiohttp_server: Any) -> None:
    async def broken(request: web.Request) -> web.Response:
        if request.path == "/query":
            return web.Response(status=500, text="boom at /secret/path")
        return web.Response(text="not json")

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://10.0.0.1/steal")

    bad = web.Application()
    bad.router.add_route("*", "/{tail:.*}", broken)
    moved = web.Application()
    moved.router.add_route("*", "/{tail:.*}", redirect)
    bad_server: TestServer = await aiohttp_server(bad)
    moved_server: TestServer = await aiohttp_server(moved)
    client = await bridge_client()
    inline = [source("broken", str(bad_server.make_url(""))), source("moved", str(moved_server.make_url("")))]
    result = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only",
                                           "knowledgeSources": inline}))
    broken_step, moved_step = (s for s in result["steps"] if s["id"].startswith("tool-"))
    observations = {o["name"]: o["value"] for o in broken_step["diagnostic"]["observations"]}
    assert observations["httpStatus"] == "500"
    assert broken_step["diagnostic"]["retryable"] is True
    moved_observations = {o["name"]: o["value"] for o in moved_step["diagnostic"]["observations"]}
    assert moved_observations["httpStatus"] == "302"  # redirects are never followed
    assert "secret" not in json.dumps(result)


async def test_timeout_is_a_source_failure(bridge_client: BridgeFactory, aiohttp_server: Any) -> None:
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    server: TestServer = await aiohttp_server(app)
    client = await bridge_client(request_timeout_ms=200)
    result = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only",
                                           "knowledgeSources": [source("slow", str(server.make_url("")))]}))
    release.set()
    [diagnostic] = result["diagnostics"]
    observations = {o["name"]: o["value"] for o in diagnostic["observations"]}
    assert observations["timeout"] == "true" and observations["timeoutMs"] == "200"


async def test_source_policy_blocks_before_connecting(bridge_client: BridgeFactory, serve_url: str,
                                                      network_guard: Any) -> None:
    client = await bridge_client(source_policy="public-https")
    blocked = ["http://10.1.2.3:8765", "http://169.254.169.254/latest", "https://192.168.1.10",
               "https://wiki.internal", "http://example.com", "https://[fd00::1]/", "ftp://127.0.0.1/"]
    inline = [source(f"blocked-{i}", url) for i, url in enumerate(blocked)]
    inline.append(source("local", serve_url))
    result = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only",
                                           "knowledgeSources": inline}))
    assert network_guard.violations == []
    tools = [s for s in result["steps"] if s["id"].startswith("tool-")]
    assert [t["status"] for t in tools] == ["error"] * len(blocked) + ["done"]
    for tool in tools[:-1]:
        observations = {o["name"]: o["value"] for o in tool["diagnostic"]["observations"]}
        assert observations["policy"] == "source-url"
        assert observations["sourcePolicy"] == "public-https"
        assert tool["diagnostic"]["retryable"] is False
    # blocked sources get no bundle step: no candidate URL was allowed
    assert not any(s["id"].startswith("source-manifest-blocked") for s in result["steps"])
    assert {c["sourceId"] for c in result["citations"]} == {"local"}
    assert "10.1.2.3" not in json.dumps(result) and "169.254" not in json.dumps(result)


async def test_allowlist_admits_exact_origins_only(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await bridge_client(source_policy="allowlist", allowed_origins=(serve_url,))
    body = {"query": QUESTION, "mode": "evidence-only", "knowledgeSources": [source("wiki", serve_url)]}
    refused = result_of(await send(client, body))
    assert refused["citations"] == []  # the CORS list does not count for sources
    await client.put("/settings/config.json", json={"allowedSourceOrigins": [serve_url]})
    assert result_of(await send(client, body))["citations"]


async def test_the_network_guard_catches_private_traffic(bridge_client: BridgeFactory,
                                                         network_guard: Any) -> None:
    """Under private-http a 10.x source is called: the guard must see (and stop) that attempt."""
    client = await bridge_client()
    result = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only",
                                           "knowledgeSources": [source("lan", "http://10.9.9.9:8765")]}))
    assert result["steps"][1]["status"] == "error"
    assert network_guard.violations and all("10.9.9.9" in v for v in network_guard.violations)
    network_guard.violations.clear()


async def test_query_variants_go_only_to_guided_sources(bridge_client: BridgeFactory, serve_url: str,
                                                        aiohttp_server: Any) -> None:
    seen: list[dict[str, Any]] = []

    async def legacy_bundle(request: web.Request) -> web.Response:
        return web.json_response({"source_id": "legacy", "capabilities": [
            "llmwiki_retrieval_v1", "llmwiki_search_mode_lexical"]})

    async def legacy_query(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response({"wiki_title": "Legacy", "evidence": [
            {"page_id": "p1", "title": "P1", "path": "p1.md", "snippet": "x"}]})

    app = web.Application()
    app.router.add_get("/source-bundle", legacy_bundle)
    app.router.add_post("/query", legacy_query)
    legacy: TestServer = await aiohttp_server(app)

    client = await bridge_client()
    retrieval = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical",
                 "search": {"limit": 5, "queryVariants": ["hotfix runbook", QUESTION.upper()],
                            "excludePageIds": ["legacy:p9", "sample-wiki:index", "shared"]}}
    payload = await send(client, {"query": QUESTION, "mode": "evidence-only", "retrieval": retrieval,
                                  "knowledgeSources": [source("sample-wiki", serve_url),
                                                       source("legacy", str(legacy.make_url("")))]})
    result = result_of(payload)
    assert seen == [{"query": QUESTION, "limit": 5, "mode": "lexical",
                     "exclude_page_ids": ["p9", "shared"]}]
    assert all(c["pageId"] != "index" for c in result["citations"] if c["sourceId"] == "sample-wiki")
    [diagnostic] = result["diagnostics"]
    observations = {o["name"]: o["value"] for o in diagnostic["observations"]}
    assert diagnostic["phase"] == "retrieval" and diagnostic["subject"] == "legacy"
    assert observations["missingCapability"] == "llmwiki_agent_guided_lexical_v1"
    assert observations["capabilityMetadataSource"] == "fresh"
    # the bundle read during discovery is reused, not read twice
    assert sum(1 for s in result["steps"] if s["id"] == "source-manifest-legacy") == 1

    # (without the exclusion naming sample-wiki, which is not selected here: that alone is a 400)
    strict = {**retrieval, "fallback": "none", "search": {**retrieval["search"], "excludePageIds": ["p9"]}}
    refused = await send(client, {"query": QUESTION, "mode": "evidence-only", "retrieval": strict,
                                  "knowledgeSources": [source("legacy", str(legacy.make_url("")))]},
                         status=400)
    assert refused["error"] == {"code": "retrieval_mode_unsupported", "message": (
        "Retrieval queryVariants require selected source(s) to advertise exact "
        "llmwiki_agent_guided_lexical_v1: legacy (llmwiki-http). Omit queryVariants, set fallback to "
        "lexical, or choose sources that advertise guided lexical query-variant support.")}
    vector = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "vector", "fallback": "none"}
    refused = await send(client, {"query": QUESTION, "mode": "evidence-only", "retrieval": vector,
                                  "knowledgeSources": [source("sample-wiki", serve_url)]}, status=400)
    assert refused["error"]["message"].startswith(
        "Retrieval searchMode vector is not supported by selected source(s): sample-wiki (llmwiki-http).")
    assert len(seen) == 1  # nothing was queried


async def test_the_default_mode_applies_only_when_a_request_names_none(bridge_client: BridgeFactory,
                                                                       serve_url: str,
                                                                       dead_url: str) -> None:
    client = await bridge_client(default_mode="evidence-only", base_url=f"{dead_url}/v1")
    inline = [source("wiki", serve_url)]
    unnamed = await client.post("/message:send",
                                json={"data": {"query": "rollback", "knowledgeSources": inline}})
    assert unnamed.status == 200
    result = result_of(await unnamed.json())
    assert result["orchestrationMode"] == "evidence-only" and result["citations"]
    named = await client.post("/message:send", json={"data": {
        "query": "rollback", "knowledgeSources": inline, "orchestrationMode": "delegated-runtime"}})
    assert named.status == 502  # the runtime is down: the named mode was used


def test_the_default_mode_must_be_a_mode() -> None:
    from bridge.config.resolve import resolve_settings
    from bridge.config.settings import BridgeSettings, SettingsError

    assert BridgeSettings().default_mode == "delegated-runtime"
    assert resolve_settings({}, {"LLMWIKI_AGENT_BRIDGE_DEFAULT_MODE": " Evidence-Only "}).default_mode == (
        "evidence-only")
    assert resolve_settings({}, {}, {"defaultOrchestrationMode": "hybrid"}).default_mode == "hybrid"
    for wrong in ("", "fast"):
        try:
            BridgeSettings(default_mode=wrong)
        except SettingsError as exc:
            assert "defaultOrchestrationMode" in str(exc)
        else:
            raise AssertionError(f"{wrong!r} was accepted")


async def test_answers_are_what_the_one_writer_writes(bridge_client: BridgeFactory, serve_url: str) -> None:
    """Every request form's answer is compact JSON from the one writer, the merged graph in it."""
    client = await bridge_client()
    sources = [source("wiki-a", serve_url), source("wiki-b", serve_url)]
    data = {"query": QUESTION, "orchestrationMode": "evidence-only", "knowledgeSources": sources}
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": QUESTION}]}
    for body in ({"data": data},
                 {"message": message, "metadata": {}, "configuration": {}, **{k: v for k, v in data.items()
                                                                                if k != "query"}},
                 {"jsonrpc": "2.0", "id": 7, "method": "message/send",
                  "params": {"message": {"kind": "message", "messageId": "m-2", "role": "user",
                                         "parts": [{"kind": "data", "data": data}]}}}):
        response = await client.post("/message:send", json=body)
        raw = await response.read()
        assert response.status == 200, raw[:300]
        assert raw == json_bytes(json.loads(raw), exact_floats=False)
        assert b'"wiki-b:' in raw and b'"graph":{"nodes":[{' in raw
