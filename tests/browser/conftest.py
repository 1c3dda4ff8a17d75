"""Browser test fixtures: two real serve instances, the real bridge, and headless Debian Chromium,
with every network access (ours and the page's) held to loopback."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp.test_utils import TestServer

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bridge.config.settings import BridgeSettings  # noqa: E402
from bridge.web.app import create_app  # noqa: E402
from serve.protocols.http import create_app as create_serve_app  # noqa: E402
from serve.settings import ServeSettings  # noqa: E402
from tests.support.folders import copy_fixture  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
# Chromium cannot be fetched by Playwright on these machines; these flags keep Debian's build
# headless and quiet (no QUIC, no background fetches, no component or sync traffic).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = REPO / "test-artifacts"
WAIT_MS = 15_000

BridgeStarter = Callable[..., Awaitable[str]]


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    host = host.strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Refuse (and fail the test on) any name lookup or connect from this process that is not loopback."""
    refused: list[str] = []
    loop_class = asyncio.base_events.BaseEventLoop
    selector_class = asyncio.selector_events.BaseSelectorEventLoop
    real_getaddrinfo = loop_class.getaddrinfo
    real_sock_connect = selector_class.sock_connect

    async def getaddrinfo(self: Any, host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and not is_loopback(str(name)):
            refused.append(f"lookup {name!r}")
            raise OSError(f"browser tests: refused lookup of {name!r}")
        return await real_getaddrinfo(self, host, *args, **kwargs)

    async def sock_connect(self: Any, sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not is_loopback(str(address[0])):
            refused.append(f"connect {address[0]!r}")
            raise OSError(f"browser tests: refused connect to {address[0]!r}")
        await real_sock_connect(self, sock, address)

    monkeypatch.setattr(loop_class, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(selector_class, "sock_connect", sock_connect)
    yield refused
    assert refused == [], f"non-loopback network access attempted: {refused}"


async def _start_serve(root: Path, cache: Path) -> TestServer:
    server = TestServer(create_serve_app(ServeSettings(root=root, cache_dir=cache)), host="127.0.0.1")
    await server.start_server()
    return server


@pytest.fixture
async def serve_urls(tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    """Our serve on copies of two fixture folders: the sample wiki and an Obsidian vault."""
    sample = await _start_serve(copy_fixture("sample-wiki", tmp_path / "roots"), tmp_path / "cache-sample")
    vault = await _start_serve(copy_fixture("shapes/obsidian-vault", tmp_path / "roots"),
                               tmp_path / "cache-vault")
    yield tuple(str(server.make_url("")).rstrip("/") for server in (sample, vault))  # type: ignore[misc]
    await sample.close()
    await vault.close()


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return tmp_path / "config" / "llmwiki-agent-bridge" / "settings.json"


@pytest.fixture
async def start_bridge(config_path: Path) -> AsyncIterator[BridgeStarter]:
    """Start the real bridge (persistence in a temporary settings file); returns its base URL."""
    servers: list[TestServer] = []

    async def start(**overrides: Any) -> str:
        overrides.setdefault("config_path", config_path)
        server = TestServer(create_app(BridgeSettings(**overrides)), host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return str(server.make_url("")).rstrip("/")

    yield start
    for server in servers:
        await server.close()


@dataclass
class PageWatch:
    """What the page did that a test should fail on: off-loopback requests and script errors."""

    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (./scripts/bootstrap test installs it)")
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=WAIT_MS)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest.fixture
async def page_watch() -> PageWatch:
    return PageWatch()


@pytest.fixture
async def page(browser: Any, page_watch: PageWatch) -> AsyncIterator[Any]:
    """A fresh page whose requests may only reach loopback; anything else is aborted and recorded."""
    context = await browser.new_context(viewport={"width": 1200, "height": 900}, service_workers="block")
    context.set_default_timeout(WAIT_MS)

    async def guard(route: Any) -> None:
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss") and is_loopback(parts.hostname):
            await route.continue_()
        else:
            page_watch.blocked.append(url)
            await route.abort()

    await context.route("**/*", guard)
    new_page = await context.new_page()
    new_page.on("pageerror", lambda error: page_watch.errors.append(str(error)))
    new_page.on("console", lambda message: page_watch.errors.append(message.text)
                if message.type == "error" and "Failed to load resource" not in message.text else None)
    yield new_page
    await context.close()
    assert page_watch.blocked == [], f"the page tried to leave loopback: {page_watch.blocked}"
    assert page_watch.errors == [], f"the page reported errors: {page_watch.errors}"
