"""A web page on the same machine cannot use the bridge: foreign Host (DNS rebinding) is 421 on
every route, a foreign Origin is 403, the agent card never reflects a Host it did not accept, and
settings written over HTTP can neither name a file nor replace a configured token without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp.test_utils import make_mocked_request

from bridge.config.resolve import OPTIONS, resolve_settings
from bridge.config.settings import BridgeSettings
from bridge.config.writes import OPERATOR_ONLY_KEYS
from bridge.service import BridgeService
from bridge.sources.protocols import source_clients
from bridge.support.errors import BridgeError
from bridge.web import a2a
from bridge.web.errors import http_error
from common.errors import CodedError
from tests.support.bridge_sources import BridgeFactory, source

ROUTES = [("GET", "/health"), ("GET", "/settings"), ("GET", "/settings.json"), ("GET", "/sources"),
          ("GET", "/settings/sources.json"), ("PUT", "/settings/config.json"),
          ("PUT", "/settings/sources.json"), ("POST", "/message:send"), ("POST", "/mcp"),
          ("POST", "/a2a/jsonrpc"), ("GET", "/.well-known/agent-card.json"), ("OPTIONS", "/settings.json"),
          ("GET", "/nope")]
HOSTILE_BODIES = {
    "/settings/config.json": {"baseUrl": "http://evil.example/v1", "bridgeBearerToken": "locked-out",
                              "allowedOrigins": ["http://evil.example"], "sourcePolicy": "private-http"},
    "/settings/sources.json": {"sources": [source("evil", "http://evil.example:8765")]},
    "/message:send": {"query": "q", "mode": "evidence-only",
                      "knowledgeSources": [source("evil", "http://127.0.0.1:9")]},
    "/mcp": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
}


def _saved(config_path: Path) -> str:
    config_path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"version": 1, "config": {"model": "owner-model"},
                       "sources": [source("wiki", "http://127.0.0.1:8765")]}, indent=2) + "\n"
    config_path.write_text(text, encoding="utf-8")
    return text


@pytest.mark.parametrize("token", [None, "owner-token"])
async def test_a_rebound_page_gets_421_everywhere_and_changes_nothing(
        bridge_client: BridgeFactory, config_path: Path, token: str | None) -> None:
    before = _saved(config_path)
    client = await bridge_client(bearer_token=token)
    port = client.port
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}",
                 f"localhost.evil.example:{port}", f"evil.localhost:{port}", f"0.0.0.0:{port}"):
        headers = {"Host": host, "Origin": f"http://{host}"}
        for method, path in ROUTES:
            response = await client.request(method, path, headers=headers, json=HOSTILE_BODIES.get(path))
            assert response.status == 421, (host, method, path)
            assert await response.json() == {"error": {
                "code": "host_not_allowed", "message": "Request host is not allowed by the bridge."}}
            assert "Access-Control-Allow-Origin" not in response.headers
    assert config_path.read_text(encoding="utf-8") == before
    owner = {"Authorization": f"Bearer {token}"} if token else {}
    shown = await (await client.get("/settings.json", headers=owner)).json()
    assert shown["bridgeAuth"]["bearerTokenConfigured"] is bool(token)
    assert shown["runtimeConnection"]["baseUrl"] == "http://127.0.0.1:8642/v1"
    assert shown["network"]["allowedOrigins"] == [] and shown["sourcePolicy"]["policy"] == "private-http"
    registered = await (await client.get("/settings/sources.json", headers=owner)).json()
    assert [s["id"] for s in registered["sources"]] == ["wiki"]


async def test_a_foreign_origin_with_a_loopback_host_is_403(bridge_client: BridgeFactory,
                                                            config_path: Path) -> None:
    before = _saved(config_path)
    client = await bridge_client()
    for origin in (f"http://evil.example:{client.port}", "https://evil.example", "null"):
        for method, path in ROUTES:
            response = await client.request(method, path, headers={"Origin": origin},
                                            json=HOSTILE_BODIES.get(path))
            assert response.status == 403, (origin, method, path)
            assert (await response.json())["error"]["code"] == "origin_not_allowed"
    assert config_path.read_text(encoding="utf-8") == before
    same = await client.get("/settings.json", headers={"Origin": f"http://127.0.0.1:{client.port}"})
    assert same.status == 200 and same.headers["Access-Control-Allow-Origin"] == f"http://127.0.0.1:{client.port}"


async def test_configured_hosts_and_their_pages_are_accepted(bridge_client: BridgeFactory) -> None:
    client = await bridge_client(public_url="https://bridge.example.org", allowed_hosts=("wiki-box",))
    for host, origin in (("bridge.example.org", "https://bridge.example.org"),
                         ("wiki-box:8788", "http://wiki-box:8788"), ("localhost:1", None)):
        headers = {"Host": host, **({"Origin": origin} if origin else {})}
        response = await client.get("/health", headers=headers)
        assert response.status == 200, host
        if origin:
            assert response.headers["Access-Control-Allow-Origin"] == origin
    # An accepted Host does not make any origin same-origin.
    response = await client.get("/health", headers={"Host": "wiki-box", "Origin": "http://evil.example"})
    assert response.status == 403


async def test_the_card_builds_urls_from_accepted_hosts_only(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    card = await (await client.get("/.well-known/agent-card.json",
                                   headers={"Host": f"localhost:{client.port}"})).json()
    urls = [i["url"] for i in card["supportedInterfaces"]]
    assert urls and all(u.startswith(f"http://localhost:{client.port}") for u in urls)
    service = BridgeService(BridgeSettings(), clients=source_clients())
    request = make_mocked_request("GET", "/.well-known/agent-card.json", headers={"Host": "evil.example:1"})
    with pytest.raises(CodedError) as raised:
        a2a._base_url(request, service)
    assert raised.value.status == 421
    published = BridgeService(BridgeSettings(public_url="https://bridge.example.org"),
                              clients=source_clients())
    assert a2a._base_url(request, published) == "https://bridge.example.org"


# -- settings written over HTTP -------------------------------------------------------------

@pytest.mark.parametrize("key", list(OPERATOR_ONLY_KEYS))
async def test_operator_only_settings_are_refused_over_http(
        bridge_client: BridgeFactory, config_path: Path, tmp_path: Path, key: str) -> None:
    target = tmp_path / "anywhere" / "owned.txt"
    client = await bridge_client(io_log_mode="off")
    for body in ({key: str(target), "ioLog": True}, {"config": {key: str(target)}}):
        response = await client.put("/settings/config.json", json=body)
        assert response.status == 400
        error = (await response.json())["error"]
        assert error["code"] == "invalid_bridge_settings"
        assert error["message"].startswith(f"{key} cannot be set over HTTP; set it with ")
        assert str(tmp_path) not in error["message"]
    assert not config_path.exists() and not target.parent.exists()
    run = await client.post("/message:send", json={"query": "q", "mode": "evidence-only",
                                                   "knowledgeSources": []})
    assert run.status in (200, 400) and not target.parent.exists()
    shown = await (await client.get("/settings.json")).json()
    assert shown["observability"]["ioLog"] is False


def test_the_settings_file_cannot_name_the_io_log_file(tmp_path: Path) -> None:
    """A file written by an older bridge (which took ioLogPath over HTTP) names no file now."""
    settings = resolve_settings({}, {}, {"ioLogPath": str(tmp_path / "evil.jsonl")})
    assert settings.io_log_path is None and settings.io_log_mode == "off"
    from_env = resolve_settings({}, {"LLMWIKI_AGENT_BRIDGE_IO_LOG_PATH": str(tmp_path / "ops.jsonl")})
    assert from_env.io_log_path == tmp_path / "ops.jsonl" and from_env.io_log_mode == "file"


async def test_changing_the_token_needs_the_current_one(bridge_client: BridgeFactory,
                                                       config_path: Path) -> None:
    client = await bridge_client(bearer_token="old-token")
    for body in ({"bridgeBearerToken": "attacker"}, {"bearerToken": "attacker"}, {"bridgeBearerToken": ""},
                 {"config": {"bridgeBearerToken": None}}):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic old-token"}):
            response = await client.put("/settings/config.json", json=body, headers=headers)
            assert response.status == 401, (body, headers)
            assert (await response.json())["error"]["code"] == "bridge_unauthorized"
    assert not config_path.exists()
    changed = await client.put("/settings/config.json", json={"bridgeBearerToken": "new-token"},
                               headers={"Authorization": "Bearer old-token"})
    assert changed.status == 200
    assert (await client.get("/health", headers={"Authorization": "Bearer old-token"})).status == 401
    cleared = await client.put("/settings/config.json", json={"bridgeBearerToken": ""},
                               headers={"Authorization": "Bearer new-token"})
    assert cleared.status == 200 and (await client.get("/health")).status == 200


def test_the_service_itself_refuses_a_token_change_without_the_token(config_path: Path) -> None:
    """Not only the pipeline: a route that reached put_config without the token still could not."""
    from bridge.config.store import SettingsStore

    service = BridgeService(BridgeSettings(bearer_token="old-token"), [], SettingsStore(config_path),
                            clients=source_clients())
    for authorization in (None, "", "Bearer other", "Bearer old-token "):
        for body in ({"bridgeBearerToken": "x"}, {"bearerToken": ""}):
            with pytest.raises(BridgeError) as raised:
                service.put_config(body, None, authorization)
            assert (raised.value.kind, raised.value.code) == ("unauthorized", "bridge_unauthorized")
            assert http_error(raised.value).status == 401
    assert service.settings.bearer_token == "old-token" and not config_path.exists()
    assert service.put_config({"model": "m"}, None, None)["status"] == "saved"  # other keys: pipeline's job
    service.put_config({"bridgeBearerToken": "next"}, None, "bearer  old-token")
    assert service.settings.bearer_token == "next"
    open_service = BridgeService(BridgeSettings(), [], SettingsStore(config_path), clients=source_clients())
    open_service.put_config({"bridgeBearerToken": "first"}, None, None)  # no token yet: setting is open
    assert open_service.settings.bearer_token == "first"


def test_other_settings_fields_name_no_path() -> None:
    """The only path-valued settings are the operator-only ones (a new one must join them)."""
    paths = {name for name, f in BridgeSettings.model_fields.items() if "Path" in str(f.annotation)}
    assert paths == {"config_path", "io_log_path", "deepagents_acp_cwd"}
    by_name = {o.name: o for o in OPTIONS}
    for name in paths | {"deepagents_acp_command", "deepagents_acp_args"}:  # what the bridge runs, too
        assert by_name[name].file_keys == ()  # neither the file nor HTTP can set them


async def test_a_refused_host_is_in_the_audit_log_without_the_name(
        bridge_client: BridgeFactory, capsys: pytest.CaptureFixture[str]) -> None:
    client = await bridge_client(audit_log=True)
    capsys.readouterr()
    hostile = {"Host": "evil-canary.example:1", "Origin": "http://evil-canary.example:1"}
    response = await client.put("/settings/config.json", json={"model": "x"}, headers=hostile)
    assert response.status == 421
    [line] = [json.loads(out) for out in capsys.readouterr().out.splitlines()
              if out.startswith("{") and '"llmwiki.agent_bridge.request"' in out]
    assert (line["route"], line["statusCode"], line["errorCode"]) == ("/settings/config.json", 421,
                                                                      "host_not_allowed")
    assert "evil-canary" not in json.dumps(line)
