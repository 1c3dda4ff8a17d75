"""Host names and origins as the network will see them: the one parser of `Host` headers, `Origin`
headers and origin settings (both services), and the loopback/public tables.

A policy decision is only as good as the host it looks at. The source client turns a non-ASCII
host into ASCII with IDNA (whose nameprep step is NFKC, so `１０.０.０.１` and `①⓪.⓪.⓪.①` become
`10.0.0.1`), and the system resolver reads `127.1`, `0x7f.0.0.1` and `2130706433` as addresses.
Every check here runs on that normalized form, never on the text as typed.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from urllib.parse import urlsplit

Address = IPv4Address | IPv6Address

# Contract 2.7, plus 255.255.255.255 (inside 240/4) for clarity.
_NON_PUBLIC_V4 = tuple(ipaddress.IPv4Network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"))
# Contract 2.7, plus ranges that are never a public host: discard-only (100::/64), Teredo
# (2001::/32, whose client part is obfuscated), benchmarking, ORCHID, the new documentation
# prefix, site-local, and local-use NAT64 (64:ff9b:1::/48).
_NON_PUBLIC_V6 = tuple(ipaddress.IPv6Network(n) for n in (
    "::/128", "::1/128", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8", "2001:db8::/32",
    "100::/64", "2001::/32", "2001:2::/48", "2001:10::/28", "2001:20::/28", "3fff::/20",
    "64:ff9b:1::/48"))
# IPv6 forms whose last 32 bits are an IPv4 address the packet ends up at (or is treated as):
# IPv4-compatible (::/96), IPv4-mapped, IPv4-translated (SIIT) and NAT64's well-known prefix.
_LOW_32_EMBEDS = tuple(ipaddress.IPv6Network(n) for n in (
    "::/96", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96"))
_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
_LOOPBACK_NAMES = ("localhost",)
_NON_PUBLIC_SUFFIXES = (".localhost", ".local", ".internal")
_FORBIDDEN = frozenset(" \t\r\n/\\@?#[]<>^|\"'`{}")


@functools.lru_cache(maxsize=4096)
def normalize_host(host: str) -> str | None:
    """The host the source client will resolve or connect to, lower-case ASCII without brackets
    or trailing dots; an address literal in its canonical form (`127.1` -> `127.0.0.1`). None
    when there is no such host (IDNA refuses it, or it holds characters no host name has)."""
    name = host.strip()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
        if ":" not in name:
            return None  # brackets hold an IPv6 literal and nothing else
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    name = name.lower().rstrip(".")
    if not name or any(ch in _FORBIDDEN for ch in name):
        return None
    address = address_of(name)
    if address is not None:
        return str(address)
    if ":" in name or "%" in name:
        return None  # neither an IPv6 literal nor a name a resolver would look up
    return name


def address_of(name: str) -> Address | None:
    """The address an (already lower-case ASCII) host literal denotes: IPv6 (a zone dropped),
    or IPv4 in any form `inet_aton` accepts, as the resolver would read it."""
    if ":" in name:
        try:
            return IPv6Address(name.split("%", 1)[0])
        except ValueError:
            return None
    return _inet_aton(name)


def _inet_aton(name: str) -> IPv4Address | None:
    """`a.b.c.d`, `a.b.c`, `a.b` and `a`, each part decimal, octal (leading 0) or hex (0x)."""
    parts = name.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        try:
            if part[:2] in ("0x", "0X"):
                numbers.append(int(part[2:], 16) if part[2:] else 0)
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part, 8))
            elif part.isdigit():
                numbers.append(int(part))
            else:
                return None
        except ValueError:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    value = last
    for index, number in enumerate(head):
        value |= number << (8 * (3 - index))
    return IPv4Address(value)


def embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, translated, NAT64, 6to4)."""
    if any(address in network for network in _LOW_32_EMBEDS):
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def is_public_address(address: Address) -> bool:
    """Not in the contract's non-public ranges; an IPv6 form that embeds IPv4 is judged by it."""
    if isinstance(address, IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None:
            return is_public_address(inner)
        return not any(address in network for network in _NON_PUBLIC_V6)
    return not any(address in network for network in _NON_PUBLIC_V4)


def is_loopback_address(address: Address) -> bool:
    """127.0.0.0/8, ::1, and IPv4-mapped loopback (which the kernel delivers to 127.x)."""
    if isinstance(address, IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped in _LOOPBACK_V4
        return address == IPv6Address("::1")
    return address in _LOOPBACK_V4


def is_loopback_host(host: str) -> bool:
    """`localhost`, `*.localhost`, 127.0.0.0/8 and ::1, after normalization (contract 1.7)."""
    name = normalize_host(host)
    if name is None:
        return False
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    address = address_of(name)
    return address is not None and is_loopback_address(address)


def is_public_host(host: str) -> bool:
    """Reachable on the public internet by the contract's rules (2.7), judged on the normalized
    host: no loopback or local-only suffix, a public address, or a DNS name with a dot whose last
    label is not a number (no top-level domain is, and URL parsers read such hosts as IPv4)."""
    name = normalize_host(host)
    if name is None:
        return False
    address = address_of(name)
    if address is not None:
        return is_public_address(address)
    if name in _LOOPBACK_NAMES or name.endswith(_NON_PUBLIC_SUFFIXES):
        return False
    return "." in name and not name.rsplit(".", 1)[1].isdigit()


@dataclass(frozen=True)
class Authority:
    """A `Host` header, parsed: the normalized host and the port, if one was given."""

    host: str
    port: int | None


def parse_authority(value: str) -> Authority | None:
    """A `Host` header (`name`, `name:port`, `[v6]:port`, or a bare IPv6 address); None when the
    header is not a plain ASCII authority (a browser sends nothing else)."""
    text = value.strip()
    if not text or not text.isascii():
        return None
    port: str | None = None
    if text.startswith("["):
        end = text.find("]")
        rest = text[end + 1:] if end > 0 else None
        if rest is None or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        text, port = text[:end + 1], rest[1:] or None
    elif text.count(":") == 1:
        text, port = text.split(":")
        if not port.isdigit():
            return None
    host = normalize_host(text)
    return None if host is None else Authority(host, int(port) if port is not None else None)


def host_of_authority(value: str) -> str | None:
    """The normalized host of a `Host` header or host setting; None when it is not one."""
    authority = parse_authority(value)
    return None if authority is None else authority.host


def is_loopback_request_host(name: str) -> bool:
    """The loopback names a `Host` header may carry: `localhost`, 127.0.0.0/8 and ::1 (IPv4-mapped
    too). Not `*.localhost`: not every browser keeps those names off DNS, and a name DNS answers
    can be rebound (a bind host or an allowed host names one explicitly)."""
    if name == "localhost":
        return True
    address = address_of(name)
    return address is not None and is_loopback_address(address)


@dataclass(frozen=True)
class Origin:
    """A browser origin, normalized: lower-case scheme, the host as `normalize_host` gives it, and
    the port unless it is the scheme's default."""

    scheme: str
    host: str
    port: int | None

    def serialized(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}" + (f":{self.port}" if self.port is not None else "")


_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of_url(value: str, *, http_only: bool = False) -> Origin | None:
    """The origin of a URL or origin setting (a path is dropped); None for `null`, userinfo,
    no host, a bad port or a host no network would reach."""
    given = value.strip()
    if not given or given == "null":
        return None
    try:
        parts = urlsplit(given)
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname or "@" in parts.netloc:
        return None
    scheme = parts.scheme.lower()
    if http_only and scheme not in _DEFAULT_PORTS:
        return None
    host = normalize_host(parts.hostname)  # compared as the network sees it (IDNA, canonical IPs)
    if host is None:
        return None
    return Origin(scheme, host, None if port == _DEFAULT_PORTS.get(scheme) else port)


def normalize_origin(value: str, *, http_only: bool = False) -> str | None:
    """`scheme://host[:port]` with the default port dropped; None for unusable entries."""
    origin = origin_of_url(value, http_only=http_only)
    return None if origin is None else origin.serialized()


def parse_origin(header: str) -> Origin | None:
    """An `Origin` header as a browser sends it (RFC 6454: scheme, host and port, nothing else,
    in ASCII); None for `null`, a path, a query, userinfo or anything unparsable."""
    text = header.strip()
    if not text.isascii() or "://" not in text:
        return None
    rest = text.split("://", 1)[1]
    if not rest or any(ch in rest for ch in "/?#@\\"):
        return None
    return origin_of_url(text)
