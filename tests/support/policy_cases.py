"""The `public-https` tables: URLs it must block and URLs it must allow, in the spellings an
attacker would try (full-width and circled digits, ideographic dots, numeric shorthands, IPv6
forms carrying IPv4) plus the DNS answers that rebind public-looking names to private addresses."""

from __future__ import annotations

import ipaddress

# Not public by the contract's table (2.7) and the extra IPv6 ranges; loopback is allowed.
PRIVATE_V4 = ("10.0.0.1", "10.255.255.254", "172.16.0.1", "172.31.255.255", "192.168.1.1",
              "169.254.169.254", "100.64.0.1", "100.127.255.254", "0.0.0.0", "0.1.2.3", "192.0.0.8",
              "192.0.2.10", "198.18.0.1", "198.19.255.1", "198.51.100.7", "203.0.113.9", "224.0.0.1",
              "239.255.255.250", "240.0.0.1", "255.255.255.255")
PRIVATE_V6 = ("::", "fc00::1", "fd12:3456:789a::1", "fe80::1", "fec0::1", "ff02::1", "2001:db8::1",
              "100::1", "2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:2::1", "2001:10::1",
              "3fff::1", "64:ff9b:1::a00:1")
PUBLIC_V4 = ("8.8.8.8", "1.1.1.1", "93.184.216.34", "140.82.112.3")

_FULLWIDTH = str.maketrans("0123456789.", "０１２３４５６７８９．")
_CIRCLED = str.maketrans("0123456789", "⓪①②③④⑤⑥⑦⑧⑨")


def _v4_spellings(address: str) -> list[str]:
    """The ways one IPv4 address can be written in a URL host that all reach it."""
    value = int(ipaddress.IPv4Address(address))
    octets = address.split(".")
    forms = [
        address,
        address.translate(_FULLWIDTH),                        # full-width digits and dot
        address.translate(_FULLWIDTH).replace("．", "."),    # full-width digits only
        address.translate(_CIRCLED),                           # circled digits
        address.replace(".", "。"),                           # ideographic full stop
        address.replace(".", "｡"),                            # half-width ideographic stop
        address + ".",                                         # trailing dot
        str(value),                                            # one decimal number
        hex(value),                                            # one hex number
        ".".join(hex(int(o)) for o in octets),                 # hex octets
        ".".join("0" + oct(int(o))[2:] for o in octets),       # octal octets
        f"{octets[0]}.{value & 0xFFFFFF}",                     # a.b (24-bit tail)
        f"[::ffff:{address}]",                                 # IPv4-mapped
        f"[::{address}]",                                      # IPv4-compatible
        f"[::ffff:0:{address}]",                               # IPv4-translated (SIIT)
        f"[64:ff9b::{address}]",                               # NAT64 well-known prefix
        f"[2002:{value >> 16:x}:{value & 0xFFFF:x}::1]",       # 6to4
        f"[::ffff:{value >> 16:x}:{value & 0xFFFF:x}]",        # IPv4-mapped, hex
    ]
    return list(dict.fromkeys(forms))


def _must_block() -> list[str]:
    urls: list[str] = []
    for address in PRIVATE_V4:
        urls += [f"https://{form}/" for form in _v4_spellings(address)]
    urls += [f"https://[{address}]/" for address in PRIVATE_V6]
    urls += ["https://[fe80::1%25eth0]/", "https://[::ffff:10.0.0.1%25x]/", "https://10.0.0.1:8443/x",
             "https://１０.０.０.１:443/query", "https://①⓪.⓪.⓪.①/", "https://⑩.0.0.1/",
             "https://1⁰.0.0.1/", "https://１０.0.0.1/", "https://10.0.0.1\u200b/"]
    # Local-only names and names that are no public DNS name at all.
    urls += ["https://printer.local/", "https://db.internal/", "https://intranet/",
             "https://wiki.corp.internal./", "https://1.0.0.0.1/", "https://999.1.1.1/",
             "https://1\u20240.0.0.1/", "https://ＰＲＩＮＴＥＲ.ＬＯＣＡＬ/", "https://db.ｉｎｔｅｒｎａｌ/"]
    # Public-looking names over plain http, and schemes that are never allowed.
    urls += ["http://wiki.example.com/", "http://8.8.8.8/", "http://８.８.８.８/", "ftp://8.8.8.8/",
             "file:///etc/passwd", "https://user:pw@8.8.8.8/", "gopher://10.0.0.1/"]
    return list(dict.fromkeys(urls))


MUST_BLOCK = _must_block()

# Names whose DNS answer is private (or mixed): the URL passes, the connection must not.
REBINDING_DNS: dict[str, str | list[str]] = {
    **{f"rebind-{i}.example.com": address for i, address in enumerate(PRIVATE_V4)},
    **{f"rebind6-{i}.example.com": address for i, address in enumerate(PRIVATE_V6)},
    "mapped.example.com": "::ffff:10.0.0.1",
    "nat64.example.com": "64:ff9b::a9fe:a9fe",
    "sixtofour.example.com": "2002:c0a8:101::1",
    "compat.example.com": "::10.0.0.1",
    "mixed.example.com": ["93.184.216.34", "10.0.0.1"],
    "mixed6.example.com": ["2606:4700::1111", "fd00::1"],
    "loopback.example.com": "127.0.0.1",  # a public name is not a loopback host
    "wiki.localhost": "10.0.0.1",         # a loopback name answered with a private address
    "evil.localhost": ["127.0.0.1", "192.168.1.1"],
    "metadata.localhost": "169.254.169.254",
}
REBINDING_URLS = [f"https://{name}/" for name in REBINDING_DNS if not name.endswith(".localhost")] + [
    "http://wiki.localhost:8765/", "https://evil.ｌｏｃａｌｈｏｓｔ/", "http://metadata.localhost/"]

MUST_ALLOW = [
    "https://8.8.8.8/", "https://1.1.1.1/", "https://93.184.216.34/", "https://[2606:4700::1111]/",
    "https://[2a00:1450:4001:830::200e]/", "https://[64:ff9b::808:808]/", "https://[::ffff:8.8.8.8]/",
    "https://[2002:808:808::1]/", "https://８.８.８.８/", "https://⑧.⑧.⑧.⑧/", "https://134744072/",
    "https://0x8.0x8.0x8.0x8/", "https://wiki.example.com/", "https://wiki.example.com./",
    "https://bücher.example/", "https://xn--bcher-kva.example/", "https://ＷＩＫＩ.ｅｘａｍｐｌｅ.ｃｏｍ/",
    "https://a.b.c.example.org:8443/path?q=1", "http://127.0.0.1:8765/", "http://localhost:8765/",
    "http://[::1]:9/", "https://127.0.0.2/", "http://wiki.localhost:8765/", "http://ｌｏｃａｌｈｏｓｔ:8765/",
    "http://0x7f.1:8765/", "http://2130706433:8765/", "http://[::ffff:127.0.0.1]:8765/",
    "http://１２７.０.０.１:8765/", "http://LOCALHOST:8765/",
]
# Public names answered with public addresses, and loopback names answered with loopback.
HONEST_DNS: dict[str, str | list[str]] = {
    "wiki.example.com": "93.184.216.34", "v6.example.com": "2606:4700::1111",
    "both.example.com": ["93.184.216.34", "2606:4700::1111"], "nat64.example.net": "64:ff9b::808:808",
    "wiki.localhost": "127.0.0.1", "six.localhost": "::1",
}
