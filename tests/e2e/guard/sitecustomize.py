"""Loaded by every Python process the e2e tier starts (it is on their PYTHONPATH): a network guard.

Connects to anything but loopback are refused and recorded in $E2E_GUARD_LOG; name lookups of
non-loopback names are answered from $E2E_FAKE_DNS (a JSON map of name -> addresses) or refused
and recorded. The tests assert the record is empty, so a policy bug shows up as a failure, never
as traffic. This is test instrumentation: it patches the standard library, not the product."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from typing import Any

_LOG = os.environ.get("E2E_GUARD_LOG", "")
_FAKE_DNS: dict[str, list[str]] = json.loads(os.environ.get("E2E_FAKE_DNS", "{}") or "{}")
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _loopback_name(host: str) -> bool:
    return host in ("localhost", "") or host.endswith(".localhost")


def _loopback_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _record(what: str) -> None:
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(what + "\n")


def _check(sock: socket.socket, address: Any) -> None:
    if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple) \
            and not _loopback_address(str(address[0])):
        _record(f"connect {address[0]}:{address[1]}")
        raise ConnectionRefusedError(111, "e2e network guard: only loopback may be connected to")


def _connect(self: socket.socket, address: Any) -> None:
    _check(self, address)
    _real_connect(self, address)


def _connect_ex(self: socket.socket, address: Any) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    if name is None or _loopback_address(str(name)):
        return _real_getaddrinfo(host, port, *args, **kwargs)
    key = str(name).lower().rstrip(".")
    if key in _FAKE_DNS:
        results = []
        for address in _FAKE_DNS[key]:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sockaddr: tuple[Any, ...] = (address, int(port or 0), 0, 0) if family == socket.AF_INET6 \
                else (address, int(port or 0))
            results.append((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr))
        return results
    if _loopback_name(key):  # answered here: *.localhost must not become a DNS query
        return _real_getaddrinfo("127.0.0.1", port, *args, **kwargs)
    try:  # an address literal in another spelling resolves without traffic
        ipaddress.ip_address(key.split("%")[0])
        return _real_getaddrinfo(host, port, *args, **kwargs)
    except ValueError:
        pass
    _record(f"resolve {key}")
    raise socket.gaierror(socket.EAI_NONAME, "e2e network guard: name not resolvable here")


socket.socket.connect = _connect  # type: ignore[method-assign]
socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
socket.getaddrinfo = _getaddrinfo
