"""Which source URLs the bridge may call (source policy) and which Host names and browser origins
may call it (the DNS-rebinding and CORS checks)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import urlsplit

from bridge.config.rules import normalize_origin
from bridge.support.hosts import (
    address_of,
    host_of_authority,
    is_loopback_address,
    is_loopback_host,
    is_public_host,
    normalize_host,
)

__all__ = ["POLICY_BLOCKED_MESSAGE", "BrowserPolicy", "SourcePolicy", "is_public_host"]

POLICY_BLOCKED_MESSAGE = "Knowledge Source URL is not allowed by this bridge source policy."


@dataclass(frozen=True)
class SourcePolicy:
    """`private-http` (any http/https URL), `allowlist` (exact origins only) or `public-https`
    (allowlisted origins, loopback, and https to public hosts). Checked before every outbound call,
    on the host as the client will resolve it (see bridge.support.hosts)."""

    policy: str = "private-http"
    allowed_origins: tuple[str, ...] = ()

    def allows(self, url: str) -> bool:
        return _allows(self, url)

    def _check(self, url: str) -> bool:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            return False
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
            return False
        host = normalize_host(parts.hostname)
        if host is None:
            return False  # no host the client could reach
        origin = normalize_origin(url, http_only=True)
        if origin is not None and origin in self.allowed_origins:
            return True
        if self.policy == "private-http":
            return True
        if self.policy == "allowlist":
            return False
        if is_loopback_host(host):
            return True
        return scheme == "https" and is_public_host(host)

    def allows_host(self, host: str) -> bool:
        """Whether `host` (normalized first) is the host of an allowlisted source origin."""
        name = normalize_host(host)
        return name is not None and name in _origin_hosts(self.allowed_origins)


@functools.lru_cache(maxsize=4096)
def _allows(policy: SourcePolicy, url: str) -> bool:
    """A run checks each source URL before each of its calls; the answer only depends on these two."""
    return policy._check(url)


@functools.lru_cache(maxsize=64)
def _origin_hosts(origins: tuple[str, ...]) -> frozenset[str]:
    return frozenset(h for h in (urlsplit(o).hostname for o in origins) if h)


def is_loopback_request_host(name: str) -> bool:
    """The loopback names a `Host` header may carry: `localhost`, 127.0.0.0/8 and ::1. Not
    `*.localhost`: not every browser keeps those names off DNS, and a name DNS answers can be
    rebound (a bind host or --allowed-host names one explicitly)."""
    if name == "localhost":
        return True
    address = address_of(name)
    return address is not None and is_loopback_address(address)


@dataclass(frozen=True)
class BrowserPolicy:
    """`Host`: a loopback name or one of `accepted_hosts` (else 421), so a page whose name was
    rebound to this machine is refused before anything else. `Origin`: none (curl, servers), a
    configured origin, an http(s) loopback origin, or one whose host is an accepted host (the
    settings page served under it). `null`, unparsable and userinfo origins are refused; the
    `Host` header is never the measure of an origin."""

    allowed_origins: tuple[str, ...] = ()
    accepted_hosts: tuple[str, ...] = ()

    def host_allowed(self, host_header: str) -> bool:
        name = host_of_authority(host_header)
        return name is not None and (is_loopback_request_host(name) or name in self.accepted_hosts)

    def origin_allowed(self, origin: str) -> bool:
        if "@" in origin:
            return False
        normalized = normalize_origin(origin)
        if normalized is None:
            return False
        if normalized in self.allowed_origins:
            return True
        parts = urlsplit(normalized)
        if parts.scheme not in ("http", "https"):
            return False
        host = parts.hostname or ""
        return is_loopback_host(host) or normalize_host(host) in self.accepted_hosts
