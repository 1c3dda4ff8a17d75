"""serve's browser defence: its policy, refusal bodies and CORS table over common/browser.py."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from common.browser import (
    BrowserPolicy,
    CorsRules,
    OriginRule,
    setup_cors,
    setup_host_check,
    setup_origin_check,
)
from common.errors import DetailError
from common.hosts import host_of_authority

WILDCARD_BINDS = frozenset({"0.0.0.0", "::", "[::]", ""})

# The contract's (6.2): the requested headers echoed on a preflight, the session id exposed.
SERVE_CORS = CorsRules(
    allow_methods="GET, POST, DELETE, OPTIONS", allow_headers=None, expose_headers=("Mcp-Session-Id",),
    preflight_status=200, preflight_text="OK", preflight_max_age=600,
    any_options_is_preflight=False, methods_on_every_answer=False)


def serve_policy(cors_origins: tuple[str, ...], allowed_hosts: tuple[str, ...],
                 bind_host: str) -> BrowserPolicy:
    """Loopback names, the bound address unless a wildcard, and `--allowed-host` entries (a port
    is ignored; `*` turns the Host check off); `--cors-origin` entries replace the local-dev
    origins. An entry that names no host accepts nothing."""
    names = [h for h in allowed_hosts if h.strip() != "*"]
    if bind_host.strip() not in WILDCARD_BINDS:
        names.append(bind_host)
    accepted = frozenset(n for n in (host_of_authority(h) for h in names) if n)
    return BrowserPolicy(accepted_hosts=accepted, any_host=any(h.strip() == "*" for h in allowed_hosts),
                         origins=tuple(cors_origins), origin_rule=OriginRule.LISTED_OR_LOCAL_DEV)


def cors_status(policy: BrowserPolicy) -> dict[str, Any]:
    """The /health CORS block: a count, never the origin strings."""
    if policy.origins:
        return {"mode": "explicit-allowlist", "local_dev_origins": False,
                "explicit_origin_count": len(policy.origins)}
    return {"mode": "local-dev-allowlist", "local_dev_origins": True, "explicit_origin_count": 0}


def setup_security(app: web.Application, policy: BrowserPolicy) -> None:
    """Host (421), Origin (403), then CORS, with the contract's `{"detail": ...}` bodies."""
    setup_host_check(app, lambda _request: policy, DetailError(421, "host not allowed"))
    setup_origin_check(app, lambda _request: policy, DetailError(403, "origin not allowed"))
    setup_cors(app, SERVE_CORS)
