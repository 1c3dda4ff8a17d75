"""Name resolution under the source policy: the addresses actually connected to are checked, so a
name cannot rebind to a private address under `public-https`."""

from __future__ import annotations

import socket
from collections.abc import Callable

from aiohttp.abc import AbstractResolver, ResolveResult

from bridge.hosts import address_of, is_loopback_address, is_loopback_host, is_public_address, normalize_host
from bridge.policy import SourcePolicy


class PolicyResolveError(OSError):
    """A source host name resolved to an address the source policy does not allow."""


class PolicyResolver(AbstractResolver):
    """Resolves once per connection through `inner` (an address literal is answered here, never
    looked up), then, under `public-https`, refuses the whole answer unless every address is
    public, or loopback for a loopback name (`*.localhost` answered with 10.0.0.1 is refused).
    Hosts of allowlisted origins are the operator's choice and pass. aiohttp and the source client
    connect only to the addresses returned here."""

    def __init__(self, inner: AbstractResolver, policy: Callable[[], SourcePolicy]) -> None:
        self.inner = inner
        self.policy = policy

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        name = normalize_host(host)
        if name is None:
            raise PolicyResolveError("Knowledge Source host is not a host name.")
        literal = address_of(name)
        if literal is not None:
            results = [ResolveResult(hostname=host, host=name, port=port,
                                     family=socket.AF_INET6 if literal.version == 6 else socket.AF_INET,
                                     proto=0, flags=socket.AI_NUMERICHOST)]
        else:
            results = await self.inner.resolve(host, port, family)
        policy = self.policy()
        if policy.policy != "public-https" or policy.allows_host(name):
            return results
        loopback_name = is_loopback_host(name)
        for result in results:
            address = address_of(result["host"].lower())
            allowed = address is not None and (
                is_loopback_address(address) if loopback_name else is_public_address(address))
            if not allowed:
                raise PolicyResolveError("Knowledge Source host resolved to a non-public address.")
        if not results:
            raise PolicyResolveError("Knowledge Source host name has no address.")
        return results

    async def close(self) -> None:
        await self.inner.close()
