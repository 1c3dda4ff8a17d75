"""The one browser defence of both services (common/browser.py, common/hosts.py): the header
parsers, and each service's Host and Origin rule over them."""

from __future__ import annotations

import pytest

from common.browser import BrowserPolicy, OriginRule
from common.hosts import Authority, Origin, parse_authority, parse_origin

SERVE = BrowserPolicy(origin_rule=OriginRule.LISTED_OR_LOCAL_DEV)
BRIDGE = BrowserPolicy(origin_rule=OriginRule.LISTED_OR_SAME_MACHINE)


@pytest.mark.parametrize(("header", "parsed"), [
    ("127.0.0.1:8765", Authority("127.0.0.1", 8765)), ("LOCALHOST", Authority("localhost", None)),
    ("[::1]:1", Authority("::1", 1)), ("::1", Authority("::1", None)),
    ("127.1:80", Authority("127.0.0.1", 80)),
    ("localhost.:9", Authority("localhost", 9)),
    ("[::1]evil", None), ("localhost:x", None), ("localhost:", None), ("127.0.0.1:1:2", None), ("", None),
    ("user@localhost", None), ("localhost/x", None), ("１２７.０.０.１", None), ("[::1", None),
])
def test_a_host_header_is_parsed_once_for_both(header: str, parsed: Authority | None) -> None:
    assert parse_authority(header) == parsed


@pytest.mark.parametrize(("header", "parsed"), [
    ("http://localhost:3000", Origin("http", "localhost", 3000)),
    ("https://[::1]", Origin("https", "::1", None)),
    ("https://app.example.org:443", Origin("https", "app.example.org", None)),
    ("HTTP://LOCALHOST", Origin("http", "localhost", None)),
    ("chrome-extension://abcdef", Origin("chrome-extension", "abcdef", None)),
    ("null", None), ("http://localhost:3000/", None), ("http://localhost:5173/path", None),
    ("http://localhost?x", None), ("http://localhost#x", None), ("http://user@localhost", None),
    ("http://１２７.０.０.１:3000", None), ("http://bücher.example", None), ("localhost:3000", None),
    ("http://", None), ("http://localhost:99999", None), ("not an origin", None),
])
def test_an_origin_header_is_only_what_a_browser_sends(header: str, parsed: Origin | None) -> None:
    assert parse_origin(header) == parsed


@pytest.mark.parametrize("header", ["localhost", "localhost:1", "127.0.0.1:8765", "127.0.0.2:9", "[::1]:80",
                                    "[::ffff:127.0.0.1]:1", "LOCALHOST:1", "localhost.:1"])
@pytest.mark.parametrize("policy", [SERVE, BRIDGE])
def test_one_loopback_host_rule(policy: BrowserPolicy, header: str) -> None:
    assert policy.host_allowed(header)


@pytest.mark.parametrize("header", ["evil.example", "evil.localhost:1", "127.0.0.1.evil.example", "0.0.0.0:1",
                                    "[::]:1", "10.0.0.5", "[::1]evil", "localhost:x", ""])
@pytest.mark.parametrize("policy", [SERVE, BRIDGE])
def test_foreign_or_malformed_hosts_are_refused(policy: BrowserPolicy, header: str) -> None:
    assert not policy.host_allowed(header)


def test_accepted_hosts_and_any_host() -> None:
    policy = BrowserPolicy(accepted_hosts=frozenset({"wiki.internal"}))
    assert policy.host_allowed("WIKI.internal:8080") and not policy.host_allowed("other.internal")
    assert BrowserPolicy(any_host=True).host_allowed("anything.example")


@pytest.mark.parametrize(("origin", "serve", "bridge"), [
    ("http://localhost:5173", True, True), ("https://127.0.0.1:1", True, True), ("http://[::1]", True, True),
    # serve compares the origin as sent and knows three loopback names; the bridge normalizes and
    # takes any loopback host (each its contract's words).
    ("http://LOCALHOST", False, True), ("http://localhost:", False, True), ("http://127.0.0.2", False, True),
    ("http://app.localhost:3000", False, True), ("http://localhost.", False, True),
    # Refused by the one parser, for both.
    ("http://localhost:5173/path", False, False), ("http://１２７.０.０.１:3000", False, False),
    ("http://user@localhost:3000", False, False), ("null", False, False), ("ftp://localhost", False, False),
    ("http://evil.example", False, False), ("https://localhost.evil.example", False, False),
])
def test_each_service_keeps_its_origin_rule(origin: str, serve: bool, bridge: bool) -> None:
    assert SERVE.origin_allowed(origin) is serve
    assert BRIDGE.origin_allowed(origin) is bridge


def test_listed_origins() -> None:
    listed = ("https://app.example.org", "null")
    serve = BrowserPolicy(origins=listed, origin_rule=OriginRule.LISTED_OR_LOCAL_DEV)
    assert serve.origin_allowed("https://app.example.org")
    for refused in ("https://app.example.org:443", "https://APP.example.org", "http://localhost:5173",
                    "null"):
        assert not serve.origin_allowed(refused), refused  # as sent, replacing local-dev; never `null`
    bridge = BrowserPolicy(accepted_hosts=frozenset({"bridge.example.org"}),
                           origins=("https://app.example.org",))
    for allowed in ("https://app.example.org", "https://app.example.org:443", "http://localhost:5173",
                    "http://bridge.example.org:8788"):
        assert bridge.origin_allowed(allowed), allowed
    assert not bridge.origin_allowed("https://app.example.org:8443")
