"""The bridge HTTP surface: health, registry views, settings round trips, and the request pipeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bridge.support.auth import bearer_matches
from tests.support.bridge_sources import BridgeFactory, source


async def test_health_reports_readiness_without_source_urls(bridge_client: BridgeFactory) -> None:
    client = await bridge_client(sources=None)
    await client.put("/settings/sources.json",
                     json={"sources": [source("wiki", "http://127.0.0.1:9/private-path")]})
    response = await client.get("/health")
    assert response.status == 200
    body = await response.json()
    assert body["status"] == "ok"
    assert body["runtime"] == "llmwiki-agent-bridge"
    assert body["runtimeProfile"] == "hermes"
    assert body["sourcePolicy"] == "private-http"
    assert body["sourceRegistry"] == {"registeredSourceCount": 1, "selectedSourceCount": 1,
                                      "selectedReadySourceCount": 1, "unavailableSourceCount": 0}
    assert body["runtimeConnection"]["requestTimeoutMs"] == 120000
    assert "private-path" not in json.dumps(body) and "127.0.0.1:9" not in json.dumps(body)
    assert response.headers["X-Request-Id"]


async def test_unknown_route_is_a_coded_404(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    for method, path in (("GET", "/"), ("DELETE", "/health"), ("GET", "/nope")):
        response = await client.request(method, path)
        assert response.status == 404
        assert await response.json() == {"error": {"code": "not_found", "message": "Not found."}}


async def test_sources_view_is_redacted(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    registered = [
        source("alpha", "http://127.0.0.1:9/wiki?token=secret#frag", root="/home/me/notes/alpha"),
        source("beta", "http://127.0.0.1:10", selected=False, root="relative/beta", bundleId="b-1"),
        source("gamma", "http://127.0.0.1:11", bundleId="b-1"),
    ]
    assert (await client.put("/settings/sources.json", json=registered)).status == 200
    body = await (await client.get("/sources")).json()
    assert body["schemaVersion"] == "llmwiki.agent-bridge.sources.v1"
    assert body["healthBasis"] == "last_known_status_bridge_policy"
    alpha, beta, _ = body["sources"]
    assert alpha["url"] == "http://127.0.0.1:9/wiki"
    assert alpha["rootLabel"] == "alpha" and alpha["rootRedacted"] is True and "root" not in alpha
    assert beta["root"] == "relative/beta" and beta["rootRedacted"] is False
    assert alpha["health"] == {"ok": True, "basis": "last_known_status_bridge_policy"}
    assert beta["health"]["ok"] is False and beta["health"]["reason"] == "not_selected"
    assert body["registeredCount"] == 3 and body["selectedCount"] == 2
    assert body["readyCount"] == 2 and body["unavailableCount"] == 1
    assert [w["code"] for w in body["warnings"]] == ["duplicate_bundle_id"]
    text = json.dumps(body)
    assert "secret" not in text and "/home/me" not in text


async def test_sources_probe_reads_live_metadata(bridge_client: BridgeFactory, serve_url: str,
                                                 dead_url: str) -> None:
    client = await bridge_client()
    await client.put("/settings/sources.json", json=[source("wiki", serve_url), source("down", dead_url)])
    body = await (await client.get("/sources?probe=1")).json()
    assert body["healthBasis"] == "live_probe"
    wiki, down = body["sources"]
    assert wiki["health"]["ok"] is True and wiki["health"]["endpoint"] == "source-bundle"
    assert wiki["bundleId"].startswith("sample-operations-wiki:")
    assert wiki["pageCount"] == 14 and wiki["approvedPageCount"] == 12
    assert wiki["adapter"] == "llmwiki-markdown"
    assert down["health"]["ok"] is False and down["health"]["reason"] == "probe_failed"
    assert down["health"]["retryable"] is True and down["health"]["redacted"] is True
    assert body["readyCount"] == 1


async def test_probe_respects_the_source_policy(bridge_client: BridgeFactory, network_guard: Any) -> None:
    client = await bridge_client(source_policy="public-https")
    await client.put("/settings/sources.json", json=[source("lan", "http://10.1.2.3:8765")])
    body = await (await client.get("/sources?probe=yes")).json()
    assert body["sources"][0]["health"] == {"ok": False, "basis": "bridge_policy",
                                            "reason": "source_policy_blocked"}
    assert network_guard.violations == []


async def test_settings_round_trip_applies_live_and_persists(bridge_client: BridgeFactory,
                                                             config_path: Path) -> None:
    client = await bridge_client()
    response = await client.put("/settings/config.json", json={"config": {
        "sourcePolicy": "allowlist", "allowedSourceOrigins": ["http://127.0.0.1:8765/"],
        "requestTimeoutMs": "5000", "model": "local-model", "apiKey": "sk-secret-value",
        "port": 9999, "host": "127.0.0.1"}})
    assert response.status == 200
    body = await response.json()
    assert body["status"] == "saved"
    assert body["restartRequired"] == ["port"]
    assert {"sourcePolicy", "allowedSourceOrigins", "requestTimeoutMs", "model", "apiKey"} <= set(
        body["applied"])
    assert body["settings"]["sourcePolicy"]["policy"] == "allowlist"
    assert body["settings"]["runtimeConnection"]["modelSource"] == "settings"
    assert body["settings"]["network"]["port"] != 9999  # only saved for the next start
    current = await (await client.get("/settings.json")).json()
    assert current["sourcePolicy"]["allowedSourceOrigins"] == ["http://127.0.0.1:8765/"]
    assert current["runtimeConnection"]["requestTimeoutMs"] == 5000
    assert current["runtimeConnection"]["apiKeyConfigured"] is True
    assert "sk-secret-value" not in json.dumps(current) and "sk-secret-value" not in json.dumps(body)
    saved = json.loads(config_path.read_text(encoding="utf-8"))
    assert saved["version"] == 1
    assert saved["config"]["port"] == 9999 and saved["config"]["sourcePolicy"] == "allowlist"
    assert saved["sources"] == []


async def test_settings_validation_is_400_and_persists_nothing(bridge_client: BridgeFactory,
                                                              config_path: Path) -> None:
    client = await bridge_client()
    for bad in ({"sourcePolicy": "weird"}, {"requestTimeoutMs": 0}, {"port": 70000},
                {"allowPublicBind": "maybe"}):
        response = await client.put("/settings/config.json", json=bad)
        assert response.status == 400, bad
        assert (await response.json())["error"]["code"] == "invalid_bridge_settings"
    assert not config_path.exists()


async def test_bearer_token_change_applies_to_the_next_request(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    assert (await client.put("/settings/config.json", json={"bridgeBearerToken": "t0ken"})).status == 200
    assert (await client.get("/health")).status == 401
    assert (await client.get("/health", headers={"Authorization": "Bearer t0ken"})).status == 200


async def test_settings_without_persistence_are_409(bridge_client: BridgeFactory) -> None:
    client = await bridge_client(config_path=None)
    response = await client.put("/settings/config.json", json={"model": "x"})
    assert response.status == 409
    assert (await response.json())["error"]["code"] == "settings_persistence_disabled"
    assert (await client.get("/settings/sources.json")).status == 200


async def test_sources_round_trip(bridge_client: BridgeFactory, config_path: Path) -> None:
    client = await bridge_client()
    response = await client.put("/settings/sources.json", json={"sources": [
        {"source_id": "wiki", "title": "Team Wiki", "url": "http://127.0.0.1:8765////",
         "page_count": 3}]})
    assert response.status == 200
    saved = (await response.json())["sources"]
    assert saved[0]["id"] == "wiki" and saved[0]["name"] == "Team Wiki"
    assert saved[0]["status"] == "ready" and saved[0]["selected"] is True
    assert saved[0]["pageCount"] == 3 and saved[0]["protocol"] == "llmwiki-http"
    listed = await (await client.get("/settings/sources.json")).json()
    assert listed["sources"] == saved
    assert listed["persistence"]["registeredSources"] == 1
    assert json.loads(config_path.read_text())["sources"][0]["url"] == "http://127.0.0.1:8765////"


async def test_a_source_sent_back_from_the_redacted_view_keeps_its_root(
        bridge_client: BridgeFactory, config_path: Path) -> None:
    client = await bridge_client()
    await client.put("/settings/sources.json", json=[
        source("wiki", "http://127.0.0.1:8765", root="/srv/private/team-wiki"),
        source("other", "http://127.0.0.1:8766", root="/srv/private/other")])
    listed = (await (await client.get("/settings/sources.json")).json())["sources"]
    assert listed[0]["rootLabel"] == "team-wiki" and "root" not in listed[0]
    listed[0]["name"] = "Renamed"  # the settings page edits and sends the whole list back
    listed[1]["url"] = "http://127.0.0.1:9999"  # a new URL is a new place: the old root goes
    assert (await client.put("/settings/sources.json", json=listed)).status == 200
    stored = json.loads(config_path.read_text())["sources"]
    assert stored[0]["root"] == "/srv/private/team-wiki" and stored[0]["name"] == "Renamed"
    assert "root" not in stored[1]


async def test_duplicate_source_ids_are_409_and_nothing_is_written(bridge_client: BridgeFactory,
                                                                   config_path: Path) -> None:
    client = await bridge_client()
    await client.put("/settings/sources.json", json=[source("keep", "http://127.0.0.1:1")])
    before = config_path.read_bytes()
    response = await client.put("/settings/sources.json", json=[
        source("dup", "http://127.0.0.1:2/secret-path"), source("other", "http://127.0.0.1:3"),
        source("dup", "http://127.0.0.1:4")])
    assert response.status == 409
    error = (await response.json())["error"]
    assert error["code"] == "duplicate_source_id"
    assert error["message"] == ('Duplicate Knowledge Source id "dup" at positions 1 and 3; source ids '
                                "must be unique.")
    assert "secret-path" not in error["message"]
    assert config_path.read_bytes() == before
    assert [s["id"] for s in (await (await client.get("/settings/sources.json")).json())["sources"]] == [
        "keep"]


async def test_invalid_sources_are_400(bridge_client: BridgeFactory, config_path: Path) -> None:
    client = await bridge_client()
    cases = [({"sources": "x"}, "Sources body must be an array"),
             (["x"], "Source 1 must be a JSON object."),
             ([{"url": "ftp://127.0.0.1/"}], "must use HTTP or HTTPS"),
             ([{"url": "http://user:pw@127.0.0.1/"}], "must not include credentials"),
             ([{"url": "http://127.0.0.1", "protocol": "gopher"}], "unsupported protocol"),
             ([{"id": "a"}], "url is required")]
    for body, fragment in cases:
        response = await client.put("/settings/sources.json", json=body)
        assert response.status == 400, body
        payload = await response.json()
        assert payload["error"]["code"] == "bad_request" and fragment in payload["error"]["message"]
        assert "pw" not in payload["error"]["message"]
    assert not config_path.exists()


async def test_corrupt_settings_file_is_reported_not_fatal(bridge_client: BridgeFactory,
                                                           config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text('{"version": 1, "config": {"port": 9', encoding="utf-8")
    client = await bridge_client()
    health = await (await client.get("/health")).json()
    assert health["settingsFile"] == {"status": "invalid"}
    assert (await (await client.get("/settings.json")).json())["persistence"]["fileStatus"] == "invalid"
    response = await client.put("/settings/config.json", json={"model": "x"})
    assert response.status == 500
    assert (await response.json())["error"]["code"] == "settings_persist_failed"
    assert config_path.read_text(encoding="utf-8") == '{"version": 1, "config": {"port": 9'


async def test_bearer_token_is_required_everywhere(bridge_client: BridgeFactory) -> None:
    client = await bridge_client(bearer_token="bridge-secret")
    for method, path in (("GET", "/health"), ("GET", "/sources"), ("GET", "/settings.json"),
                         ("POST", "/message:send"), ("GET", "/nope")):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer "},
                        {"Authorization": "Basic bridge-secret"},
                        {"Authorization": "Bearer bridge-secretx"}):
            response = await client.request(method, path, headers=headers)
            assert response.status == 401, (path, headers)
            assert await response.json() == {"error": {"code": "bridge_unauthorized",
                                                       "message": "Bridge bearer token is required."}}
    ok = await client.get("/health", headers={"Authorization": "bEaReR     bridge-secret"})
    assert ok.status == 200
    preflight = await client.options("/message:send")
    assert preflight.status == 204


def test_bearer_compare_is_constant_time(monkeypatch: Any) -> None:
    import hmac

    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert bearer_matches("Bearer \tabc", "abc") is True
    assert bearer_matches("Bearer abd", "abc") is False
    assert calls == [(b"abc", b"abc"), (b"abd", b"abc")]
    assert bearer_matches(None, "abc") is False
    assert bearer_matches("Bearer abc ", "abc") is False  # trailing whitespace is not trimmed
    assert bearer_matches("Bearer", "abc") is False


async def test_foreign_origin_is_403_before_any_handler(bridge_client: BridgeFactory) -> None:
    client = await bridge_client(bearer_token="t", allowed_origins=("https://app.example",))
    response = await client.get("/health", headers={"Origin": "https://evil.example"})
    assert response.status == 403
    assert (await response.json())["error"]["code"] == "origin_not_allowed"
    assert "Access-Control-Allow-Origin" not in response.headers
    for origin in ("null", "http://user@localhost:3000", "http://localhost:3000/page", "http://localhost:3000?x",
                   "http://１２７.０.０.１:3000"):  # no browser sends these (common/hosts.parse_origin)
        refused = await client.get("/health", headers={"Origin": origin})
        assert refused.status == 403, origin
        assert "Access-Control-Allow-Origin" not in refused.headers
    for origin in ("http://localhost:3000", "https://app.example", "http://127.0.0.1:5173"):
        allowed = await client.get("/health", headers={"Origin": origin, "Authorization": "Bearer t"})
        assert allowed.status == 200
        assert allowed.headers["Access-Control-Allow-Origin"] == origin
        assert allowed.headers["Vary"] == "Origin"


async def test_the_cors_table_on_every_kind_of_answer(bridge_client: BridgeFactory) -> None:
    """Contract 2.1-2.2 through common/browser.py: the allow headers and `Vary` on every answer a
    Host the bridge accepts gets (a refused origin's included, without the origin), a preflight at
    any path is 204 with no body, and a refused Host gets no CORS header at all."""
    client = await bridge_client(bearer_token="t")
    fixed = {"Access-Control-Allow-Headers": "authorization, content-type, a2a-version",
             "Access-Control-Allow-Methods": "GET, POST, PUT, DELETE, OPTIONS", "Vary": "Origin"}
    origin = "http://localhost:3000"
    answers = {
        "preflight": await client.options(
            "/anything", headers={"Origin": origin, "Access-Control-Request-Headers": "x-other"}),
        "bare preflight": await client.options("/health"),
        "401": await client.get("/health", headers={"Origin": origin}),
        "404": await client.get("/nope", headers={"Origin": origin, "Authorization": "Bearer t"}),
        "403": await client.get("/health", headers={"Origin": "https://evil.example"}),
        "no origin": await client.get("/health", headers={"Authorization": "Bearer t"}),
    }
    for name, response in answers.items():
        for header, value in fixed.items():
            assert response.headers.get(header) == value, (name, header)
        assert "Access-Control-Allow-Credentials" not in response.headers, name
        assert "Access-Control-Expose-Headers" not in response.headers, name
        allowed = response.headers.get("Access-Control-Allow-Origin")
        assert allowed == (origin if name in ("preflight", "401", "404") else None), name
    assert answers["preflight"].status == answers["bare preflight"].status == 204
    assert await answers["preflight"].read() == b""
    assert "Access-Control-Max-Age" not in answers["preflight"].headers
    refused = await client.get("/health", headers={"Host": "evil.example", "Origin": origin})
    assert refused.status == 421
    assert not [h for h in refused.headers if h.lower().startswith("access-control-") or h == "Vary"]


async def test_body_cap_is_413(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    big = json.dumps({"data": {"query": "x" * (2 * 1024 * 1024)}})
    response = await client.post("/message:send", data=big)
    assert response.status == 413
    assert (await response.json())["error"] == {"code": "body_too_large",
                                                "message": "Request body is too large."}

    async def chunks() -> Any:  # no Content-Length: the cap applies while reading
        for _ in range(3):
            yield b"x" * (1024 * 1024)

    streamed = await client.put("/settings/sources.json", data=chunks())
    assert streamed.status == 413


async def test_invalid_json_is_400(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    response = await client.put("/settings/sources.json", data="{not json")
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "invalid_json"
    send = await client.post("/message:send", data="{not json", headers={"X-Trace-Id": "trace-1"})
    body = await send.json()
    assert send.status == 400 and body["error"]["code"] == "invalid_json"
    assert body["traceId"] == "trace-1" and body["requestId"]
