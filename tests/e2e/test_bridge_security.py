"""The installed bridge, as deployed with its default settings (no token), against a web page on the
same machine: a DNS-rebinding page (foreign Host and Origin) gets 421 on every route, a foreign
Origin 403, and the settings file is unchanged; settings over HTTP cannot name a file; the token is
only replaced with it; `public-https` blocks private addresses however they are written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.processes import Service, start_bridge, stop_checked

SAVED = {"version": 1, "config": {"model": "owner-model", "sourcePolicy": "private-http"},
         "sources": [{"id": "wiki", "name": "Wiki", "protocol": "llmwiki-http",
                      "url": "http://127.0.0.1:9"}]}
# What a hostile page would send on each route: repoint the runtime, lock the owner out, open
# CORS to itself, register its own source, run, and list tools.
ATTEMPTS: list[tuple[str, str, Any]] = [
    ("GET", "/settings", None), ("GET", "/settings.json", None), ("GET", "/health", None),
    ("GET", "/sources", None), ("GET", "/settings/sources.json", None),
    ("GET", "/.well-known/agent-card.json", None),
    ("PUT", "/settings/config.json", {"baseUrl": "http://evil.example/v1", "bridgeBearerToken": "gotcha",
                                      "allowedOrigins": ["http://evil.example"]}),
    ("PUT", "/settings/sources.json", {"sources": [{"id": "evil", "url": "http://evil.example:8765"}]}),
    ("POST", "/message:send", {"query": "What is in the wiki?", "mode": "evidence-only"}),
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ("POST", "/a2a/jsonrpc", {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}),
    ("OPTIONS", "/settings/config.json", None),
]


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[Service]:
    service = start_bridge(tmp_path, settings=SAVED)
    yield service
    stop_checked(service)


def _port(service: Service) -> int:
    return int(service.url.rsplit(":", 1)[1])


def _send(service: Service, method: str, path: str, body: Any, headers: dict[str, str]) -> httpx.Response:
    with httpx.Client(base_url=service.url, timeout=30, trust_env=False) as client:
        return client.request(method, path, json=body, headers=headers)


def test_the_ready_line_says_the_defaults_are_in_force(bridge: Service) -> None:
    ready = bridge.extra["ready"]
    assert ready["bridgeAuthConfigured"] is False and ready["publicBind"] is False
    assert ready["url"].startswith("http://127.0.0.1:")


def test_a_rebinding_page_gets_421_everywhere_and_changes_nothing(bridge: Service) -> None:
    config: Path = bridge.extra["config"]
    before = config.read_bytes()
    port = _port(bridge)
    for host in (f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", f"evil.localhost:{port}"):
        for method, path, body in ATTEMPTS:
            response = _send(bridge, method, path, body, {"Host": host, "Origin": f"http://{host}"})
            assert response.status_code == 421, (host, method, path, response.text)
            assert response.json() == {"error": {"code": "host_not_allowed",
                                                 "message": "Request host is not allowed by the bridge."}}
            assert "access-control-allow-origin" not in response.headers
    assert config.read_bytes() == before
    shown = _send(bridge, "GET", "/settings.json", None, {}).json()
    assert shown["bridgeAuth"]["bearerTokenConfigured"] is False
    assert shown["runtimeConnection"]["baseUrl"] == "http://127.0.0.1:8642/v1"
    assert shown["network"]["allowedOrigins"] == []


def test_a_foreign_origin_gets_403_everywhere_and_changes_nothing(bridge: Service) -> None:
    config: Path = bridge.extra["config"]
    before = config.read_bytes()
    port = _port(bridge)
    for origin in (f"http://evil.example:{port}", "https://evil.example", "null"):
        for method, path, body in ATTEMPTS:
            response = _send(bridge, method, path, body, {"Origin": origin})
            assert response.status_code == 403, (origin, method, path, response.text)
            assert response.json()["error"]["code"] == "origin_not_allowed"
    assert config.read_bytes() == before
    # The settings page itself, opened on loopback, still works from the browser's side.
    page = _send(bridge, "GET", "/settings.json", None, {"Origin": f"http://127.0.0.1:{port}"})
    assert page.status_code == 200
    assert page.headers["access-control-allow-origin"] == f"http://127.0.0.1:{port}"
    card = _send(bridge, "GET", "/.well-known/agent-card.json", None, {"Host": f"localhost:{port}"}).json()
    assert all(i["url"].startswith(f"http://localhost:{port}") for i in card["supportedInterfaces"])


def test_settings_over_http_cannot_name_a_file(bridge: Service, tmp_path: Path) -> None:
    config: Path = bridge.extra["config"]
    before = config.read_bytes()
    target = tmp_path / "anywhere" / "owned.txt"
    for body in ({"ioLog": True, "ioLogPath": str(target)}, {"config": {"ioLogPath": str(target)}}):
        response = _send(bridge, "PUT", "/settings/config.json", body, {})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_bridge_settings"
        assert error["message"] == ("ioLogPath cannot be set over HTTP; set it with --io-log-path or "
                                    "LLMWIKI_AGENT_BRIDGE_IO_LOG_PATH when starting the bridge.")
    assert config.read_bytes() == before
    run = _send(bridge, "POST", "/message:send", {"query": "release", "mode": "evidence-only"}, {})
    assert run.status_code == 200
    assert not target.parent.exists()


def test_the_token_is_only_replaced_with_the_current_one(bridge: Service) -> None:
    config: Path = bridge.extra["config"]
    set_first = _send(bridge, "PUT", "/settings/config.json", {"bridgeBearerToken": "owner-1"}, {})
    assert set_first.status_code == 200  # no token yet: the owner on loopback sets one
    saved = config.read_bytes()
    for body in ({"bridgeBearerToken": "attacker"}, {"bearerToken": "attacker"}, {"bridgeBearerToken": ""}):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "owner-1"}):
            response = _send(bridge, "PUT", "/settings/config.json", body, headers)
            assert response.status_code == 401, (body, headers)
            assert response.json()["error"]["code"] == "bridge_unauthorized"
    assert config.read_bytes() == saved
    changed = _send(bridge, "PUT", "/settings/config.json", {"bridgeBearerToken": "owner-2"},
                    {"Authorization": "Bearer owner-1"})
    assert changed.status_code == 200
    assert _send(bridge, "GET", "/health", None, {"Authorization": "Bearer owner-1"}).status_code == 401
    assert _send(bridge, "GET", "/health", None, {"Authorization": "Bearer owner-2"}).status_code == 200
    assert json.loads(config.read_text(encoding="utf-8"))["config"]["bridgeBearerToken"] == "owner-2"


def test_public_https_blocks_private_addresses_however_written(tmp_path: Path) -> None:
    """The bridge's own resolver sees these answers; its network guard records any other connect."""
    dns = {"rebind.example.com": ["10.0.0.1"], "mixed.example.com": ["93.184.216.34", "192.168.1.1"],
           "wiki.localhost": ["10.0.0.1"], "mapped.example.com": ["::ffff:169.254.169.254"]}
    service = start_bridge(tmp_path, "--source-policy", "public-https", settings={"version": 1},
                           fake_dns=dns)
    try:
        urls = ["https://１０.０.０.１/", "https://①⓪.⓪.⓪.①/", "https://10。0。0。1/", "https://0xa9.0xfe.0xa9.0xfe/",
                "https://[::ffff:0:10.0.0.1]/", "https://[64:ff9b::a00:1]/", "https://[2002:c0a8:101::1]/",
                "https://[::10.0.0.1]/", "https://rebind.example.com/", "https://mixed.example.com/",
                "https://mapped.example.com/", "http://wiki.localhost:8765/"]
        sources = [{"id": f"s{i}", "name": f"S{i}", "protocol": "llmwiki-http", "status": "ready", "url": url}
                   for i, url in enumerate(urls)]
        response = _send(service, "POST", "/message:send",
                         {"query": "release", "mode": "evidence-only", "knowledgeSources": sources}, {})
        assert response.status_code == 200, response.text
        result = response.json()["artifacts"][0]["parts"][0]["data"]
        tools = [s for s in result["steps"] if s["id"].startswith("tool-")]
        assert [t["status"] for t in tools] == ["error"] * len(urls)
        for tool in tools:
            observed = {o["name"]: o["value"] for o in tool["diagnostic"]["observations"]}
            assert observed["policy"] == "source-url", tool
        assert result["citations"] == []
    finally:
        stop_checked(service)
