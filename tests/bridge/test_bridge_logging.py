"""The opt-in audit log and I/O debug log (contract 9): what they write, what they never write,
their settings, and the redaction they go through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.config.resolve import resolve_settings
from bridge.config.settings import BridgeSettings, SettingsError, parse_setting
from bridge.support.redaction import MAX_ITEMS, MAX_STRING, redact, redact_text
from tests.support.bridge_sources import BridgeFactory, Client, source
from tests.support.fake_openai import FakeOpenAI

QUESTION = "Which canary-question-7731 decision froze the release?"
TOKEN = "bridge-token-canary-5511"
API_KEY = "sk-canary-runtime-key-9902"


def stdout_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def audit_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [line for line in stdout_lines(capsys) if line.get("event") == "llmwiki.agent_bridge.request"]


def run(serve_url: str, mode: str = "evidence-only", **data: Any) -> dict[str, Any]:
    return {"data": {"query": QUESTION, "orchestrationMode": mode,
                     "knowledgeSources": [source("wiki-canary-src", serve_url)], **data}}


AUTH = {"Authorization": f"Bearer {TOKEN}"}


# -- the audit log ---------------------------------------------------------------------------


async def test_audit_line_of_a_run_has_counts_and_no_content(
        bridge_client: BridgeFactory, serve_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    client: Client = await bridge_client(audit_log=True, bearer_token=TOKEN)
    response = await client.post("/message:send?secret=query-canary", json=run(serve_url),
                                 headers={**AUTH, "X-Request-Id": "req-audit-1", "X-Trace-Id": "trace-a1"})
    task = await response.json()
    assert response.status == 200
    result = task["artifacts"][0]["parts"][0]["data"]
    raw = capsys.readouterr().out
    [line] = [json.loads(text) for text in raw.splitlines() if "agent_bridge.request" in text]
    assert line["schemaVersion"] == "llmwiki.agent-bridge.support.audit.v1"
    assert (line["requestId"], line["traceId"], line["method"], line["route"], line["statusCode"]) == (
        "req-audit-1", "trace-a1", "POST", "/message:send", 200)
    assert line["orchestrationMode"] == "evidence-only" and line["runtimeCalled"] is False
    assert (line["selectedSourceCount"], line["selectedReadySourceCount"]) == (1, 1)
    assert line["citationCount"] == len(result["citations"]) > 0
    assert line["graphNodeCount"] == len(result["graph"]["nodes"])
    assert (line["sourceBundleCount"], line["artifactCount"], line["diagnosticCount"]) == (1, 1, 0)
    assert line["conversationContextProvided"] is False and line["authorized"] is True
    assert line["sourcePolicy"] == "private-http" and line["durationMs"] >= 0
    assert {k: line[k] for k in ("redacted", "routePatternOnly", "queryStringLogged", "requestBodyLogged",
                                 "responseBodyLogged", "credentialsLogged", "sourceUrlsLogged")} == {
        "redacted": True, "routePatternOnly": True, "queryStringLogged": False, "requestBodyLogged": False,
        "responseBodyLogged": False, "credentialsLogged": False, "sourceUrlsLogged": False}
    for canary in ("canary-question", "query-canary", TOKEN, serve_url, "wiki-canary-src",
                   result["citations"][0]["id"], result["answer"][:40]):
        assert canary not in raw


async def test_refusals_preflights_and_other_routes(
        bridge_client: BridgeFactory, capsys: pytest.CaptureFixture[str]) -> None:
    client: Client = await bridge_client(audit_log=True, bearer_token=TOKEN)
    assert (await client.get("/health")).status == 401
    foreign = {**AUTH, "Origin": "https://evil.example"}
    assert (await client.get("/settings.json", headers=foreign)).status == 403
    assert (await client.options("/message:send", headers={"Origin": "http://localhost:3000"})).status == 204
    assert (await client.get("/sources?probe=0&token=q-canary", headers=AUTH)).status == 200
    assert (await client.get("/not-a-route", headers=AUTH)).status == 404
    unauthorized, forbidden, preflight, sources = audit_lines(capsys)
    assert (unauthorized["route"], unauthorized["statusCode"], unauthorized["authorized"],
            unauthorized["errorCode"]) == ("/health", 401, False, "bridge_unauthorized")
    assert (forbidden["statusCode"], forbidden["originAllowed"], forbidden["errorCode"]) == (
        403, False, "origin_not_allowed")
    assert (preflight["method"], preflight["statusCode"], preflight["originAllowed"]) == (
        "OPTIONS", 204, True)
    assert (sources["route"], sources["statusCode"], sources["authorized"]) == ("/sources", 200, True)
    assert "q-canary" not in json.dumps(sources) and "orchestrationMode" not in sources


async def test_mcp_names_are_only_known_ones(bridge_client: BridgeFactory,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    client: Client = await bridge_client(audit_log=True)
    for method, params in (("tools/list", {}), ("tools/call", {"name": "secret-tool-canary"}),
                           ("weird/method-canary", {})):
        await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    listed, unknown_tool, unknown_method = audit_lines(capsys)
    assert listed["mcpMethod"] == "tools/list" and "mcpError" not in listed
    assert (unknown_tool["mcpMethod"], unknown_tool["mcpToolName"], unknown_tool["mcpError"],
            unknown_tool["mcpErrorCode"]) == ("tools/call", "[unknown]", True, -32602)
    assert unknown_method["mcpMethod"] == "[unknown]" and unknown_method["mcpErrorCode"] == -32601
    assert "canary" not in json.dumps([listed, unknown_tool, unknown_method])


async def test_runtime_run_counts_and_nothing_when_off(
        bridge_client: BridgeFactory, serve_url: str, fake: FakeOpenAI,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake.answer("The freeze holds [1](#citation-1).")
    on: Client = await bridge_client(audit_log=True, base_url=fake.url, model="m", config_path=None)
    assert (await on.post("/message:send", json=run(serve_url, "delegated-runtime"))).status == 200
    [line] = audit_lines(capsys)
    assert line["runtimeCalled"] is True and line["orchestrationMode"] == "delegated-runtime"
    fake.answer("again [1](#citation-1)")
    off: Client = await bridge_client(base_url=fake.url, model="m", config_path=None)
    assert (await off.post("/message:send", json=run(serve_url, "delegated-runtime"))).status == 200
    assert stdout_lines(capsys) == []


# -- the I/O log -----------------------------------------------------------------------------


def io_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_io_log_file_holds_the_run_redacted(
        bridge_client: BridgeFactory, serve_url: str, fake: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "logs" / "io.jsonl"
    fake.answer(f"The answer-canary-4410 cites [1](#citation-1). See {fake.url}/secret and {API_KEY}.")
    client: Client = await bridge_client(io_log_mode="file", io_log_path=path, bearer_token=TOKEN,
                                         base_url=fake.url, model="model-name-canary", api_key=API_KEY)
    response = await client.post("/message:send", json=run(serve_url, "delegated-runtime"),
                                 headers={**AUTH, "X-Request-Id": "req-io-1", "X-Trace-Id": "trace-io-1"})
    assert response.status == 200
    raw = path.read_text(encoding="utf-8")
    events = io_events(path)
    phases = [e["phase"] for e in events]
    assert phases[0] == "bridge.request" and phases[-1] == "bridge.response"
    assert {"source.request", "source.response", "runtime.request", "runtime.response"} <= set(phases)
    for event in events:
        assert event["schemaVersion"] == "llmwiki.agent-bridge.io.v1" and event["redacted"] is True
        assert (event["requestId"], event["traceId"]) == ("req-io-1", "trace-io-1")
    request = events[0]["request"]
    assert request["body"]["data"]["query"] == QUESTION  # prompts and questions are the point
    assert request["headers"]["authorization"] == "[redacted]"
    assert request["headers"]["content-type"].startswith("application/json")
    queried = next(e for e in events if e["phase"] == "source.request" and e["operation"] == "query")
    assert queried["target"] == {"kind": "source", "operation": "query", "route": "/query",
                                 "queryStringRedacted": False, "urlRedacted": True,
                                 "source": {"id": "wiki-canary-src", "name": "Wiki Canary Src",
                                            "protocol": "llmwiki-http"}}
    answered = next(e for e in events if e["phase"] == "source.response" and e["operation"] == "query")
    assert answered["response"]["status"] == 200 and answered["response"]["body"]["evidence"]
    assert answered["durationMs"] >= 0
    prompt = next(e for e in events if e["phase"] == "runtime.request")["request"]
    assert "model" not in prompt and prompt["redactedSensitiveField"] is True
    assert QUESTION in json.dumps(prompt["messages"])
    assert "answer-canary-4410" in raw
    for secret in (TOKEN, API_KEY, serve_url, fake.url, "model-name-canary", str(tmp_path)):
        assert secret not in raw, secret


async def test_io_log_failures_and_logger_mode(
        bridge_client: BridgeFactory, dead_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    client: Client = await bridge_client(io_log_mode="logger", config_path=None)
    response = await client.post("/message:send", json={"data": {
        "query": QUESTION, "orchestrationMode": "evidence-only",
        "knowledgeSources": [source("down", dead_url)]}})
    assert response.status == 200
    events = [e for e in stdout_lines(capsys) if e.get("event") == "llmwiki.agent_bridge.io"]
    failed = [e for e in events if e["phase"] == "source.error"]
    assert failed and all(e["error"]["name"] == "SourceCallError" for e in failed)
    assert dead_url not in json.dumps(events)
    refused = await client.post("/message:send", json={"data": {"query": QUESTION,
                                                                 "orchestrationMode": "telepathy"}})
    assert refused.status == 400
    [error] = [e for e in stdout_lines(capsys) if e.get("phase", "").startswith("bridge.")]
    assert error["phase"] == "bridge.error" and error["response"]["status"] == 400


async def test_runtime_timeout_is_a_runtime_error_event(
        bridge_client: BridgeFactory, serve_url: str, fake: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "io.jsonl"
    client: Client = await bridge_client(io_log_mode="file", io_log_path=path, base_url=fake.url,
                                         model="m", request_timeout_ms=1500)
    assert (await client.post("/message:send", json=run(serve_url))).status == 200  # index built
    fake.hang()
    response = await client.post("/message:send", json=run(serve_url, "delegated-runtime"),
                                 headers={"X-Request-Id": "req-timeout", "X-Trace-Id": "trace-timeout"})
    assert response.status == 502
    events = [e for e in io_events(path) if e.get("requestId") == "req-timeout"]
    [failed] = [e for e in events if e["phase"] == "runtime.error"]
    assert failed["traceId"] == "trace-timeout" and failed["error"]["timeout"] is True
    assert failed["target"]["kind"] == "runtime" and failed["target"]["route"] == "/v1/chat/completions"
    assert events[-1]["phase"] == "bridge.error" and events[-1]["response"]["status"] == 502


async def test_an_unwritable_io_log_never_fails_a_request(
        bridge_client: BridgeFactory, serve_url: str, tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    client: Client = await bridge_client(io_log_mode="file", io_log_path=blocker / "io.jsonl")
    response = await client.post("/message:send", json=run(serve_url))
    assert response.status == 200 and (await response.json())["artifacts"]


# -- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "mode"), [
    ("0", "off"), ("disabled", "off"), ("None", "off"), ("1", "file"), ("ON", "file"), ("jsonl", "file"),
    ("std-out", "logger"), ("log", "logger"), (True, "file"), (False, "off")])
def test_io_log_mode_aliases(given: str | bool, mode: str) -> None:
    assert parse_setting("io_log_mode", given) == mode


def test_io_log_resolution(tmp_path: Path) -> None:
    assert resolve_settings({}, {}, {}).io_log_mode == "off"  # opt-in, unlike the reference
    assert resolve_settings({}, {}, {}).audit_log is False
    env = resolve_settings({}, {"LLMWIKI_AGENT_BRIDGE_IO_LOG": "logger",
                                "LLMWIKI_AGENT_BRIDGE_AUDIT_LOG": "yes"})
    assert (env.io_log_mode, env.audit_log, env.io_log_file) == ("logger", True, None)
    by_path = resolve_settings({}, {"LLMWIKI_AGENT_BRIDGE_IO_LOG_PATH": str(tmp_path / "x.jsonl")})
    assert (by_path.io_log_mode, by_path.io_log_file) == ("file", tmp_path / "x.jsonl")
    filed = resolve_settings({}, {}, {"ioLog": True, "auditLogEnabled": True})
    assert (filed.io_log_mode, filed.audit_log) == ("file", True)
    assert filed.io_log_file == Path.cwd() / ".runtime-logs" / "llmwiki-agent-bridge-io.jsonl"
    with pytest.raises(SettingsError, match="I/O log mode"):
        resolve_settings({}, {"LLMWIKI_AGENT_BRIDGE_IO_LOG": "sometimes"})
    with pytest.raises(SettingsError):
        resolve_settings({}, {}, {"auditLog": "yes"})  # settings-file booleans are JSON booleans
    with pytest.raises(SettingsError):
        BridgeSettings(io_log_mode="verbose")


async def test_observability_settings_are_shown_and_changed_live(
        bridge_client: BridgeFactory, config_path: Path, serve_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "live.jsonl"  # the operator's choice of file, given when the bridge starts
    client: Client = await bridge_client(io_log_path=path, io_log_mode="off")
    shown = await (await client.get("/settings.json")).json()
    assert shown["observability"] == {"auditLog": False, "ioLog": False, "ioLogMode": "off",
                                      "ioLogPathConfigured": True}
    saved = await client.put("/settings/config.json", json={"auditLog": "on", "ioLog": True})
    body = await saved.json()
    assert saved.status == 200, body
    assert {"auditLog", "ioLog", "ioLogMode"} <= set(body["applied"])
    assert body["settings"]["observability"] == {"auditLog": True, "ioLog": True, "ioLogMode": "file",
                                                 "ioLogPathConfigured": True}
    stored = json.loads(config_path.read_text())["config"]
    assert (stored["auditLog"], stored["ioLog"], stored["ioLogMode"]) == (True, True, "file")
    assert "ioLogPath" not in stored
    assert (await client.post("/message:send", json=run(serve_url))).status == 200
    assert [e["phase"] for e in io_events(path)][0] == "bridge.request"
    assert audit_lines(capsys)[-1]["route"] == "/message:send"
    bad = await client.put("/settings/config.json", json={"ioLogMode": "sometimes"})
    assert bad.status == 400 and (await bad.json())["error"]["code"] == "invalid_bridge_settings"


# -- redaction -------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "kept", "gone"), [
    ("Authorization: Bearer abc.def-123", "Bearer [redacted]", "abc.def"),
    ("key sk-proj-AbCdEf123456 and hf_abcdefghij", "[redacted-key]", "AbCdEf123456"),
    ("see https://user:pw@wiki.example/a?b=1 now", "see [redacted-url] now", "wiki.example"),
    ("cache at /home/alice/.cache and C:\\Users\\bob\\x and \\\\srv\\share\\f", "[redacted-path]", "alice"),
    ("cache at /home/alice/.cache and C:\\Users\\bob\\x and \\\\srv\\share\\f", "[redacted-path]", "bob"),
    ("cache at /home/alice/.cache and C:\\Users\\bob\\x and \\\\srv\\share\\f", "[redacted-path]", "srv"),
    ('{"api_key": "k-123456", "password":hunter2}', '"api_key": [redacted]', "hunter2"),
    ("?token=abc&page=2", "page=2", "abc"),
    ("Cookie: session=s3cret", "Cookie: [redacted]", "s3cret"),
])
def test_strings_are_redacted(text: str, kept: str, gone: str) -> None:
    out = redact_text(text)
    assert kept in out and gone not in out


def test_keys_values_and_bounds_are_redacted() -> None:
    out = redact({"model": "m", "baseUrl": "http://x", "x-api-key": "k", "accessToken": "t", "url": "http://y",
                  "publicUri": "llmwiki://p", "nested": {"embedding_vector": [1, 2], "text": "ok"},
                  "list": list(range(MAX_ITEMS + 7)), "long": "a" * (MAX_STRING + 5),
                  "deep": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": "bottom"}}}}}}}}})
    assert "model" not in out and "baseUrl" not in out and out["redactedSensitiveField"] is True
    assert out["x-api-key"] == "[redacted]" and out["accessToken"] == "[redacted]"
    assert out["url"] == "[redacted-url]" and out["publicUri"] == "[redacted-url]"
    assert out["nested"] == {"text": "ok", "redactedSensitiveField": True}
    assert out["list"][-1] == "[7 item(s) truncated]" and len(out["list"]) == MAX_ITEMS + 1
    assert out["long"].startswith("a" * MAX_STRING) and out["long"].endswith("[5 character(s) truncated]")
    assert "bottom" not in json.dumps(out) and "[truncated]" in json.dumps(out)
