"""Name resolution and connects under the source policy: the addresses actually connected to are
checked, so a name cannot rebind to a private address under `public-https`, and an address
literal (which aiohttp connects to without asking the resolver) is judged before its socket
exists."""

from __future__ import annotations

import socket
from collections import OrderedDict
from collections.abc import Callable, Iterable

from aiohttp import AddrInfoType
from aiohttp.abc import AbstractResolver, ResolveResult

from bridge.config.policy import SourcePolicy
from common.hosts import (
    address_of,
    is_loopback_address,
    is_loopback_host,
    is_public_address,
    normalize_host,
)


class PolicyResolveError(OSError):
    """A source host name resolved to an address the source policy does not allow."""


class PolicyResolver(AbstractResolver):
    """Resolves once per connection through `inner` (an address literal is answered here, never
    looked up), then, under `public-https`, refuses the whole answer unless every address is
    public, or loopback for a loopback name (`*.localhost` answered with 10.0.0.1 is refused).
    Hosts of allowlisted origins are the operator's choice and pass. aiohttp and the source client
    connect only to the addresses returned here."""

    def __init__(self, inner: AbstractResolver, policy: Callable[[], SourcePolicy],
                 guard: ConnectGuard | None = None) -> None:
        self.inner = inner
        self.policy = policy
        self.guard = guard

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
        if policy.policy != "public-https":
            return results
        if policy.allows_host(name):  # the operator's choice: what the name answers is connected to
            if self.guard is not None:
                self.guard.approve(r["host"] for r in results)
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
        if loopback_name and self.guard is not None:
            self.guard.approve(r["host"] for r in results)
        return results

    async def close(self) -> None:
        await self.inner.close()


class ConnectGuard:
    """The last check before a socket is made (aiohttp's socket factory): under `public-https`
    an address must be public, loopback, an allowlisted origin's literal host, or one the
    resolver approved for an allowlisted name. aiohttp never asks the resolver about an address
    literal, so this is where `https://[::ffff:10.0.0.1]/` is stopped even if a caller skipped
    the URL check."""

    KEPT = 1024  # approved addresses remembered (a bounded, recent set)

    def __init__(self, policy: Callable[[], SourcePolicy]) -> None:
        self.policy = policy
        self._approved: OrderedDict[str, None] = OrderedDict()

    def approve(self, addresses: Iterable[str]) -> None:
        for address in addresses:
            self._approved[address.lower()] = None
            self._approved.move_to_end(address.lower())
        while len(self._approved) > self.KEPT:
            self._approved.popitem(last=False)

    def allows(self, host: str) -> bool:
        policy = self.policy()
        if policy.policy != "public-https":
            return True
        name = host.lower()
        address = address_of(name)
        if address is None:
            return False
        return (is_public_address(address) or is_loopback_address(address) or name in self._approved
                or policy.allows_host(name))

    def __call__(self, addr_info: AddrInfoType) -> socket.socket:
        family, kind, proto, _, sockaddr = addr_info
        if not self.allows(str(sockaddr[0])):
            raise PolicyResolveError("Knowledge Source address is not allowed by the source policy.")
        return socket.socket(family=family, type=kind, proto=proto)
