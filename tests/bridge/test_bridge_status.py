"""Honest status: the runtime probe, the last source probe, and testing a source before it is saved."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.support.bridge_sources import BridgeFactory, source
from tests.support.fake_openai import FakeOpenAI


async def test_health_probe_says_when_the_runtime_is_unreachable(bridge_client: BridgeFactory,
                                                                dead_url: str, fake: FakeOpenAI) -> None:
    down = await bridge_client(base_url=f"{dead_url}/v1")
    plain = await (await down.get("/health")).json()
    assert plain["status"] == "ok" and plain["runtimeConnection"]["reachability"] == {
        "checked": False, "basis": "not_probed"}
    probed = await (await down.get("/health?probe=1")).json()
    reachability = probed["runtimeConnection"]["reachability"]
    assert probed["status"] == "degraded"
    assert reachability["reachable"] is False and reachability["ok"] is False
    assert reachability["reason"] == "request_failed" and reachability["redacted"] is True

    up = await bridge_client(base_url=fake.url)
    probed = await (await up.get("/health?probe=1")).json()
    assert probed["status"] == "ok"
    assert probed["runtimeConnection"]["reachability"]["httpStatus"] == 200
    fake.models_status = 401  # reached, but it refuses the bridge: runs would fail
    probed = await (await up.get("/health?probe")).json()
    assert probed["status"] == "degraded"
    assert probed["runtimeConnection"]["reachability"]["reachable"] is True

    acp = await bridge_client(runtime_adapter="deepagents-acp", base_url=f"{dead_url}/v1")
    probed = await (await acp.get("/health?probe=1")).json()
    assert probed["status"] == "ok" and probed["runtimeAdapter"] == "deepagents-acp"
    assert probed["runtimeConnection"]["reachability"] == {"checked": False, "basis": "adapter_not_probeable",
                                                           "protocol": "acp"}


async def test_sources_show_the_last_probe(bridge_client: BridgeFactory, serve_url: str,
                                           dead_url: str) -> None:
    client = await bridge_client(sources=None)
    response = await client.put("/settings/sources.json", json=[source("wiki", serve_url),
                                                                source("down", f"{dead_url}/?token=abc")])
    assert response.status == 200
    before = await (await client.get("/sources")).json()
    assert all("lastProbe" not in entry for entry in before["sources"])
    probed = await (await client.get("/sources?probe=1")).json()
    wiki, down = probed["sources"]
    assert wiki["health"]["ok"] is True and down["health"]["ok"] is False
    assert down["health"]["reason"] == "probe_failed" and down["health"]["message"]
    after = await (await client.get("/sources")).json()
    assert after["healthBasis"] == "last_known_status_bridge_policy"
    assert [e["lastProbe"] for e in after["sources"]] == [wiki["health"], down["health"]]
    assert dead_url not in json.dumps(down["health"]) and "abc" not in json.dumps(after)


async def test_a_source_row_can_be_tested_before_it_is_saved(bridge_client: BridgeFactory, serve_url: str,
                                                            aiohttp_server: Any, network_guard: Any) -> None:
    async def unavailable(request: web.Request) -> web.Response:
        return web.Response(status=503, text="down for maintenance at /srv/secret")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", unavailable)
    broken: TestServer = await aiohttp_server(app)
    client = await bridge_client()

    async def probe(body: Any, status: int = 200) -> dict[str, Any]:
        response = await client.post("/sources/probe", json=body)
        payload: dict[str, Any] = await response.json()
        assert response.status == status, payload
        return payload

    draft = {"id": "draft", "name": "Draft", "protocol": "llmwiki-http", "url": serve_url, "selected": False}
    entry = (await probe(draft))["source"]
    assert entry["health"]["ok"] is True and entry["health"]["endpoint"] == "source-bundle"
    assert entry["bundleId"] and isinstance(entry["pageCount"], int)
    assert (await (await client.get("/settings/sources.json")).json())["sources"] == []  # nothing saved

    failed = (await probe({"source": {"id": "bad", "url": str(broken.make_url("/"))}}))["source"]["health"]
    assert failed["ok"] is False and failed["httpStatus"] == "503" and failed["retryable"] is True
    assert "503" in failed["message"] and "/srv/secret" not in failed["message"]
    assert str(broken.make_url("")) not in failed["message"]

    refused = await probe({"id": "x", "url": "ftp://127.0.0.1/"}, status=400)
    assert refused["error"]["code"] == "bad_request"
    strict = await bridge_client(source_policy="allowlist")
    blocked = (await (await strict.post("/sources/probe", json={"url": "http://10.9.9.9:8765"})).json())
    assert blocked["source"]["health"] == {"ok": False, "basis": "bridge_policy",
                                           "reason": "source_policy_blocked"}
    assert network_guard.violations == []
