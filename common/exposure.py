"""Start-up warnings for a service opened beyond this host: one line each, logged before it listens.

Neither service refuses these set-ups (a reverse proxy, a LAN, a container network all want
them); the warning makes sure the operator chose them knowingly."""

from __future__ import annotations

from dataclasses import dataclass

from common.hosts import is_loopback_host


@dataclass(frozen=True)
class ExposureWarning:
    event: str
    message: str


def is_loopback_bind(host: str) -> bool:
    """`localhost`, `*.localhost`, 127.0.0.0/8, ::1 and IPv4-mapped 127.x, read as the resolver
    reads them (common/hosts.py). An empty host, a wildcard (0.0.0.0, ::) and any other name or
    address are reachable from elsewhere."""
    return is_loopback_host(host)


def exposure_warnings(host: str, *, public_bind: bool | None = None, any_host: bool = False,
                      drafts: bool = False) -> list[ExposureWarning]:
    """What to warn about for a bind to `host` (`public_bind` when the service has its own rule
    for it), a Host check turned off (`any_host`) and withheld pages offered (`drafts`)."""
    public = not is_loopback_bind(host) if public_bind is None else public_bind
    warnings: list[ExposureWarning] = []
    if public:
        warnings.append(ExposureWarning(
            "public_bind", f"listening on {host or 'every address'}, reachable from other hosts: "
                           "put TLS and authentication in front (a reverse proxy)"))
    if any_host:
        warnings.append(ExposureWarning(
            "any_host_allowed", "--allowed-host '*' turns the Host header check off: a web page "
                                "on a rebinding name can reach this service through a browser"))
    if drafts and public:
        warnings.append(ExposureWarning(
            "drafts_on_public_bind", "--allow-drafts on a public bind: any client that reaches "
                                     "this address may ask for withheld pages"))
    return warnings
