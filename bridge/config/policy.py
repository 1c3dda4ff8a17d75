"""Which source URLs the bridge may call: the source policy (the browser policy, which Host names
and origins may call the bridge, is common/browser.py's, built in service.py)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import urlsplit

from common.hosts import is_loopback_host, is_public_host, normalize_host, normalize_origin

__all__ = ["POLICY_BLOCKED_MESSAGE", "SourcePolicy", "is_public_host"]

POLICY_BLOCKED_MESSAGE = "Knowledge Source URL is not allowed by this bridge source policy."


@dataclass(frozen=True)
class SourcePolicy:
    """`private-http` (any http/https URL), `allowlist` (exact origins only) or `public-https`
    (allowlisted origins, loopback, and https to public hosts). Checked before every outbound call,
    on the host as the client will resolve it (see common.hosts)."""

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

