"""The policy tables: host normalization, the `public-https` must-block / must-allow lists, the
allowlist's normalized comparison, and the Host/Origin checks (pure functions, no I/O)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from yarl import URL

from bridge.config.policy import SourcePolicy
from bridge.config.settings import BridgeSettings, SettingsError, parse_setting
from common.browser import BrowserPolicy
from common.hosts import host_of_authority, is_loopback_host, is_public_host, normalize_host
from tests.support.policy_cases import MUST_ALLOW, MUST_BLOCK, REBINDING_URLS

PUBLIC_HTTPS = SourcePolicy("public-https")


def test_the_tables_are_big_enough_to_mean_something() -> None:
    assert len(MUST_BLOCK) >= 375 and len(MUST_ALLOW) >= 25


@pytest.mark.parametrize("url", MUST_BLOCK)
def test_public_https_blocks(url: str) -> None:
    assert not PUBLIC_HTTPS.allows(url)


@pytest.mark.parametrize("url", MUST_ALLOW)
def test_public_https_allows(url: str) -> None:
    assert PUBLIC_HTTPS.allows(url)


@pytest.mark.parametrize("url", REBINDING_URLS)
def test_rebinding_names_pass_the_url_check(url: str) -> None:
    """These look public (or loopback) as written: only the address check can stop them, which
    test_bridge_policy_blocking proves it does."""
    assert PUBLIC_HTTPS.allows(url)


@pytest.mark.parametrize("url", [u for u in MUST_BLOCK + MUST_ALLOW if u.startswith(("http:", "https:"))])
def test_the_policy_judges_the_host_the_client_connects_to(url: str) -> None:
    """The source client's own reading of the URL (IDNA-encoded host) is judged the same way: the
    policy cannot be looking at a different host than the one connected to."""
    try:
        client_host = URL(url).raw_host  # what aiohttp connects to
    except (ValueError, UnicodeError):
        return  # the client refuses the URL itself: nothing is connected to
    if client_host is None:
        return
    written = urlsplit(url).hostname or ""
    assert normalize_host(client_host) == normalize_host(written)
    assert is_public_host(client_host) == is_public_host(written)
    assert is_loopback_host(client_host) == is_loopback_host(written)


@pytest.mark.parametrize(("host", "normalized"), [
    ("１０.０.０.１", "10.0.0.1"), ("①⓪.⓪.⓪.①", "10.0.0.1"), ("10。0。0。1", "10.0.0.1"),
    ("127.1", "127.0.0.1"), ("0x7f.0.0.1", "127.0.0.1"), ("2130706433", "127.0.0.1"),
    ("017700000001", "127.0.0.1"), ("[::FFFF:10.0.0.1]", "::ffff:a00:1"),
    ("Wiki.Example.COM.", "wiki.example.com"),
    ("bücher.example", "xn--bcher-kva.example"), ("ＬＯＣＡＬＨＯＳＴ", "localhost"),
    ("fe80::1%eth0", "fe80::1"), ("a b.example", None), ("", None), ("x" * 64 + ".例え", None),
    ("%31%30.0.0.1", None), ("[v1.x]", None), ("::zz", None),
])
def test_normalize_host(host: str, normalized: str | None) -> None:
    assert normalize_host(host) == normalized


def test_private_http_and_allowlist_compare_normalized_hosts() -> None:
    origins = parse_setting("allowed_source_origins", ["http://10.0.0.9:8765", "https://bücher.example"])
    assert origins == ("http://10.0.0.9:8765", "https://xn--bcher-kva.example")
    allowlist = SourcePolicy("allowlist", origins)
    for url in ("http://１０.０.０.９:8765/query", "http://10.0.0.9.:8765", "http://0xa.0.0.9:8765",
                "https://xn--bcher-kva.example/x", "https://BÜCHER.example/"):
        assert allowlist.allows(url), url
    for url in ("http://10.0.0.9:8766", "https://bucher.example/", "http://10.0.0.10:8765"):
        assert not allowlist.allows(url), url
    private = SourcePolicy("private-http")
    assert private.allows("http://１０.０.０.１/") and private.allows("https://bücher.example/")
    assert not private.allows("http://a%20b.example/") and not private.allows("https://[::zz]/")
    # An allowlisted origin passes public-https however it is written.
    assert SourcePolicy("public-https", origins).allows("http://①⓪.⓪.⓪.⑨:8765/")
    assert SourcePolicy("public-https", origins).allows_host("１０.０.０.９")


def test_public_host_rules_by_address_family() -> None:
    assert not is_public_host("::ffff:0:a00:1") and not is_public_host("64:ff9b::c0a8:101")
    assert not is_public_host("2002:a9fe:a9fe::") and not is_public_host("::a00:1")
    assert is_public_host("64:ff9b::808:808") and is_public_host("2002:808:808::")
    assert not is_public_host("2001:0:4136:e378:8000:63bf:3fff:fdd2")  # Teredo
    assert is_loopback_host("::ffff:127.0.0.1") and not is_loopback_host("::127.0.0.1")


# -- Host and Origin ----------------------------------------------------------------------

@pytest.mark.parametrize(("header", "host"), [
    ("127.0.0.1:8788", "127.0.0.1"), ("LOCALHOST:1", "localhost"), ("[::1]:8788", "::1"), ("::1", "::1"),
    ("localhost.", "localhost"), ("bridge.example.org", "bridge.example.org"), ("", None),
    ("127.0.0.1:", None), ("127.0.0.1:x", None), ("[::1]x", None), ("[::1", None), ("１２７.０.０.１", None),
    ("user@127.0.0.1", None), ("127.0.0.1/x", None), ("a b", None),
])
def test_host_of_authority(header: str, host: str | None) -> None:
    assert host_of_authority(header) == host


LOOPBACK_ONLY = BrowserPolicy()


@pytest.mark.parametrize("header", ["127.0.0.1:8788", "127.0.0.1", "localhost:8788", "LOCALHOST",
                                    "[::1]:8788", "127.0.0.2:9", "localhost.:8788",
                                    "[::ffff:127.0.0.1]:8788"])
def test_loopback_hosts_are_accepted(header: str) -> None:
    assert LOOPBACK_ONLY.host_allowed(header)


@pytest.mark.parametrize("header", [
    "evil.example:8788", "evil.example", "", " ", "127.0.0.1.evil.example", "localhost.evil.example:8788",
    "evil.localhost:8788", "0.0.0.0:8788", "[::]:8788", "10.0.0.1:8788", "１２７.０.０.１:8788",
    "127.0.0.1:8788:1", "127.0.0.1:x", "user@127.0.0.1", "[::1]evil", "bridge.example.org"])
def test_foreign_hosts_are_refused(header: str) -> None:
    assert not LOOPBACK_ONLY.host_allowed(header)


def test_accepted_hosts_come_from_the_configuration() -> None:
    settings = BridgeSettings(host="192.168.1.5",
                              allowed_hosts=parse_setting("allowed_hosts", "wiki-box, Bridge.LAN:8788"),
                              public_url="https://bridge.example.org",
                              allowed_origins=("https://app.example.org",))
    assert settings.accepted_hosts == ("wiki-box", "bridge.lan", "192.168.1.5", "bridge.example.org",
                                       "app.example.org")
    assert BridgeSettings(host="0.0.0.0").accepted_hosts == ()
    assert BridgeSettings(host="::").accepted_hosts == ()
    policy = BrowserPolicy(frozenset(settings.accepted_hosts), origins=settings.allowed_origins)
    for header in ("192.168.1.5:8788", "bridge.example.org", "BRIDGE.lan:1", "wiki-box:8788"):
        assert policy.host_allowed(header), header
    assert not policy.host_allowed("evil.example:8788")
    with pytest.raises(SettingsError, match="not a host name"):
        parse_setting("allowed_hosts", "good.example, bad host")


@pytest.mark.parametrize(("origin", "allowed"), [
    ("http://localhost:3000", True), ("http://127.0.0.1:5173", True), ("https://[::1]:1", True),
    ("http://app.localhost:3000", True),   # loopback origins, as the contract lists them
    ("https://app.example.org", True),     # a configured origin
    ("https://bridge.example.org", True),  # the page served under an accepted host
    ("http://bridge.example.org:8788", True),
    ("http://evil.example:8788", False), ("https://evil.example", False), ("null", False),
    ("http://user@localhost:3000", False), ("file://localhost", False), ("not an origin", False),
    ("http://127.0.0.1.evil.example", False), ("http://localhost.evil.example:8788", False),
])
def test_origins(origin: str, allowed: bool) -> None:
    policy = BrowserPolicy(accepted_hosts=frozenset({"bridge.example.org"}), origins=("https://app.example.org",))
    assert policy.origin_allowed(origin) is allowed
