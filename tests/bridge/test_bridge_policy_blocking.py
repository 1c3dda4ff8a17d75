"""Every `public-https` must-block case is blocked by the bridge itself, before any connection:
the URL check, the resolver's address check (address literals included) and the A2A card's
message URL. The autouse network guard fails any test that resolves or connects beyond loopback,
and a blocked call must say it was the policy (a refused loopback connect would not)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from yarl import URL

from bridge.config.policy import POLICY_BLOCKED_MESSAGE, SourcePolicy
from bridge.config.registry import normalize_inline
from bridge.config.settings import BridgeSettings
from bridge.sources.a2a_source import MESSAGE_URL_BLOCKED, A2aSourceClient
from bridge.sources.base import SourceCallError
from bridge.sources.protocols import source_clients
from bridge.sources.resolver import PolicyResolveError, PolicyResolver
from bridge.sources.transport import SourceTransport, call_json, source_http_client
from bridge.web.app import create_app
from common.hosts import address_of, is_loopback_address, is_public_address, normalize_host
from tests.support.bridge_sources import FakeDns, observations, source
from tests.support.policy_cases import HONEST_DNS, MUST_BLOCK, REBINDING_DNS, REBINDING_URLS

POLICY = SourcePolicy("public-https")
REFUSED_URLS = (aiohttp.InvalidUrlClientError, aiohttp.NonHttpUrlClientError)


def transport_over(dns: FakeDns) -> SourceTransport:
    return SourceTransport(source_http_client(lambda: POLICY, dns), POLICY, 5.0, clients=source_clients())


def client_host(url: str) -> str | None:
    """The host the source client (aiohttp, through yarl) connects to for `url`, or None when it
    refuses the URL itself."""
    try:
        return URL(url).raw_host
    except (ValueError, UnicodeError):
        return None


def _private_literal(url: str) -> bool:
    """A URL whose host, as the client reads it, is a non-public, non-loopback address."""
    host = client_host(url)
    if host is None:
        return False
    name = normalize_host(host)
    address = address_of(name) if name else None
    return address is not None and not is_public_address(address) and not is_loopback_address(address)


ADDRESS_LITERALS = [u for u in MUST_BLOCK if _private_literal(u)]


@pytest.mark.parametrize("url", MUST_BLOCK)
async def test_each_blocked_url_fails_before_connecting(url: str, network_guard: Any) -> None:
    dns = FakeDns(REBINDING_DNS)
    transport = transport_over(dns)
    with pytest.raises(SourceCallError) as raised:
        await call_json(transport, "GET", url, "Source")
    await transport.http.close()
    assert raised.value.policy and raised.value.message == POLICY_BLOCKED_MESSAGE
    assert dns.asked == [] and network_guard.violations == []


@pytest.mark.parametrize("url", ADDRESS_LITERALS)
async def test_the_client_checks_address_literals_without_the_url_check(url: str, network_guard: Any) -> None:
    """Even a caller that skipped the URL check cannot connect: the address goes through the
    policy resolver like any name (the bug was that `１０.０.０.１` became a literal after IDNA and
    was connected to directly)."""
    dns = FakeDns({})
    async with source_http_client(lambda: POLICY, dns) as http:
        with pytest.raises((aiohttp.ClientConnectorError, *REFUSED_URLS)) as raised:
            async with http.get(url):
                pass
    # The connect guard, before a socket exists; or aiohttp refusing the URL itself (a
    # non-canonical IPv4, a scheme that is not HTTP).
    refused = raised.value
    assert isinstance(refused, REFUSED_URLS) or isinstance(refused.os_error, PolicyResolveError)
    assert dns.asked == [] and network_guard.violations == []  # a literal is never looked up


def test_the_literal_table_covers_every_trick() -> None:
    assert len(ADDRESS_LITERALS) >= 330
    written = [urlsplit(u).hostname or "" for u in ADDRESS_LITERALS]
    assert any(not h.isascii() for h in written) and any(h.startswith("::") for h in written)


@pytest.mark.parametrize("url", REBINDING_URLS)
async def test_names_answered_with_private_addresses_are_refused(url: str, network_guard: Any) -> None:
    dns = FakeDns(REBINDING_DNS)
    transport = transport_over(dns)
    with pytest.raises(SourceCallError) as raised:
        await call_json(transport, "GET", url, "Source")
    await transport.http.close()
    assert raised.value.policy, raised.value.message
    assert dns.asked == [client_host(url)]  # the URL passed; the answer was refused
    assert network_guard.violations == []


@pytest.mark.parametrize("name", list(HONEST_DNS))
async def test_honest_answers_pass_the_resolver(name: str) -> None:
    resolver = PolicyResolver(FakeDns(HONEST_DNS), lambda: POLICY)
    answer = HONEST_DNS[name]
    assert [r["host"] for r in await resolver.resolve(name, 443)] == (
        [answer] if isinstance(answer, str) else answer)


async def test_the_resolver_checks_only_under_public_https() -> None:
    dns = FakeDns(REBINDING_DNS)
    for policy in ("private-http", "allowlist"):
        resolver = PolicyResolver(dns, lambda p=policy: SourcePolicy(p))  # type: ignore[misc]
        assert (await resolver.resolve("wiki.localhost", 80))[0]["host"] == "10.0.0.1"
    allowlisted = PolicyResolver(dns, lambda: SourcePolicy("public-https", ("http://wiki.localhost:8765",)))
    assert (await allowlisted.resolve("wiki.localhost", 8765))[0]["host"] == "10.0.0.1"
    with pytest.raises(PolicyResolveError):
        await PolicyResolver(FakeDns({"empty.example.com": []}), lambda: POLICY).resolve("empty.example.com")


# -- the same through the running bridge ----------------------------------------------------

SAMPLE = ["https://１０.０.０.１/", "https://①⓪.⓪.⓪.①/", "https://10。0。0。1/", "https://[::10.0.0.1]/",
          "https://[64:ff9b::a9fe:a9fe]/", "https://[2002:c0a8:101::1]/", "https://[::ffff:0:10.0.0.1]/",
          "https://0xa9.0xfe.0xa9.0xfe/", "https://2852039166/", "https://evil.ｌｏｃａｌｈｏｓｔ/",
          "http://wiki.localhost:8765/", "https://rebind-0.example.com/", "https://mixed.example.com/",
          "https://nat64.example.com/"]


async def test_runs_through_the_bridge_block_every_sample(config_path: Any, network_guard: Any) -> None:
    dns = FakeDns(REBINDING_DNS)
    app = create_app(BridgeSettings(source_policy="public-https", config_path=config_path), None, dns)
    inline = [source(f"s{i}", url) for i, url in enumerate(SAMPLE)]
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        response = await client.post("/message:send", json={
            "query": "release", "mode": "evidence-only", "knowledgeSources": inline})
        assert response.status == 200
        result = (await response.json())["artifacts"][0]["parts"][0]["data"]
    tools = [s for s in result["steps"] if s["id"].startswith("tool-")]
    assert [t["status"] for t in tools] == ["error"] * len(SAMPLE)
    for tool in tools:
        assert observations(tool["diagnostic"])["policy"] == "source-url", tool
    assert result["citations"] == [] and network_guard.violations == []
    text = json.dumps(result, ensure_ascii=False)
    assert "10.0.0.1" not in text and "１０" not in text  # no URL or address leaks into the answer


@pytest.mark.parametrize("target", ["https://１０.０.０.１/message:send", "https://①⑨②.①⑥⑧.⓪.①/send",
                                    "https://[::169.254.169.254]/send", "https://10.1/send",
                                    "https://[64:ff9b::a00:1]/send", "https://rebind-4.example.com/send"])
async def test_a2a_card_message_urls_are_normalized_before_the_check(
        target: str, aiohttp_server: Any, network_guard: Any) -> None:
    """The card is on loopback (allowed); the message URL it names only looks harmless as text."""
    posted: list[str] = []

    async def card(request: web.Request) -> web.Response:
        return web.json_response({"url": target})

    async def message(request: web.Request) -> web.Response:
        posted.append(request.path)
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", card)
    app.router.add_post("/{tail:.*}", message)
    server = await aiohttp_server(app)
    dns = FakeDns(REBINDING_DNS)
    transport = transport_over(dns)
    [descriptor] = normalize_inline([{**source("agent", str(server.make_url("")).rstrip("/")),
                                      "protocol": "a2a"}])
    with pytest.raises(SourceCallError) as raised:
        await A2aSourceClient(transport, descriptor).context({"query": "release"})
    await transport.http.close()
    assert raised.value.policy and posted == [] and network_guard.violations == []
    if "rebind" in target:  # looks public: the resolver refuses the private answer at connect time
        assert raised.value.message == POLICY_BLOCKED_MESSAGE and dns.asked == ["rebind-4.example.com"]
    else:
        assert raised.value.message == MESSAGE_URL_BLOCKED and dns.asked == []


async def test_the_connect_guard_lets_through_what_the_operator_allowlisted() -> None:
    """An allowlisted name may answer a private address (the operator's choice): the resolver
    approves that answer, so the guard lets the connect through; other private addresses stay out."""
    from bridge.sources.resolver import ConnectGuard

    policy = SourcePolicy("public-https", ("https://wiki.corp.example", "https://10.9.9.9"))
    guard = ConnectGuard(lambda: policy)
    resolver = PolicyResolver(FakeDns({"wiki.corp.example": "10.1.2.3"}), lambda: policy, guard)
    assert not guard.allows("10.1.2.3")
    assert [r["host"] for r in await resolver.resolve("wiki.corp.example", 443)] == ["10.1.2.3"]
    assert guard.allows("10.1.2.3") and guard.allows("10.9.9.9")  # approved; an allowlisted literal
    assert not guard.allows("10.1.2.4") and not guard.allows("::ffff:10.1.2.4")
    assert guard.allows("127.0.0.1") and guard.allows("93.184.216.34")
    assert ConnectGuard(lambda: SourcePolicy("private-http")).allows("10.1.2.4")
