"""Name resolution under the source policy: the addresses actually connected to are checked, so a
name cannot rebind to a private address under `public-https`."""

from __future__ import annotations

import socket
from collections.abc import Callable

from aiohttp.abc import AbstractResolver, ResolveResult

from bridge.policy import SourcePolicy, is_public_host
from bridge.settings import is_loopback_host


class PolicyResolveError(OSError):
    """A source host name resolved to an address the source policy does not allow."""


class PolicyResolver(AbstractResolver):
    """Resolves once per connection through `inner`, then refuses the whole answer if any address
    is not public when the policy is `public-https` (loopback names and allowlisted origins'
    hosts excepted, as for URLs). aiohttp connects only to the addresses returned here."""

    def __init__(self, inner: AbstractResolver, policy: Callable[[], SourcePolicy]) -> None:
        self.inner = inner
        self.policy = policy

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        results = await self.inner.resolve(host, port, family)
        policy = self.policy()
        if policy.policy != "public-https" or is_loopback_host(host) or policy.allows_host(host):
            return results
        if not results or any(not is_public_host(r["host"]) for r in results):
            raise PolicyResolveError("Knowledge Source host resolved to a non-public address.")
        return results

    async def close(self) -> None:
        await self.inner.close()
