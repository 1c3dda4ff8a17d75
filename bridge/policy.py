"""Which source URLs the bridge may call (source policy) and which browser origins may call it (CORS)."""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from bridge.settings import is_loopback_host, normalize_origin

POLICY_BLOCKED_MESSAGE = "Knowledge Source URL is not allowed by this bridge source policy."

_PRIVATE_V4 = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"))
_PRIVATE_V6 = tuple(ipaddress.ip_network(n) for n in (
    "::/128", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8", "2001:db8::/32"))


def is_public_host(host: str) -> bool:
    """True for hosts that are reachable on the public internet by the contract's rules (2.7)."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if not name or name == "localhost" or name.endswith((".localhost", ".local", ".internal")):
        return False
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return "." in name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    networks = _PRIVATE_V4 if isinstance(address, ipaddress.IPv4Address) else _PRIVATE_V6
    return not any(address in network for network in networks)


@dataclass(frozen=True)
class SourcePolicy:
    """`private-http` (any http/https URL), `allowlist` (exact origins only) or `public-https`
    (allowlisted origins, loopback, and https to public hosts). Checked before every outbound call."""

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
        origin = normalize_origin(url, http_only=True)
        if origin is not None and origin in self.allowed_origins:
            return True
        if self.policy == "private-http":
            return True
        if self.policy == "allowlist":
            return False
        if is_loopback_host(parts.hostname):
            return True
        return scheme == "https" and is_public_host(parts.hostname)

    def allows_host(self, host: str) -> bool:
        """Whether `host` is the host of an allowlisted source origin."""
        name = host.strip().strip("[]").rstrip(".").lower()
        return any((urlsplit(o).hostname or "") == name for o in self.allowed_origins)


@functools.lru_cache(maxsize=4096)
def _allows(policy: SourcePolicy, url: str) -> bool:
    """A run checks each source URL before each of its calls; the answer only depends on these two."""
    return policy._check(url)


@dataclass(frozen=True)
class CorsPolicy:
    """No Origin: allowed. Otherwise same-origin with the Host header, a configured origin, or an
    http(s) loopback origin. `null`, unparsable and userinfo origins are refused."""

    allowed_origins: tuple[str, ...] = ()

    def allows(self, origin: str, host_header: str) -> bool:
        if "@" in origin:
            return False
        normalized = normalize_origin(origin)
        if normalized is None:
            return False
        if host_header and normalized == normalize_origin(f"http://{host_header}"):
            return True
        if normalized in self.allowed_origins:
            return True
        parts = urlsplit(normalized)
        return parts.scheme in ("http", "https") and is_loopback_host(parts.hostname or "")
