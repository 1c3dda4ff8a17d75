"""Bridge test fixtures: a loopback-only network guard, our serve on the sample wiki, and the bridge."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bridge.config.settings import BridgeSettings  # noqa: E402
from bridge.web.app import create_app  # noqa: E402
from serve.protocols.http import create_app as create_serve_app  # noqa: E402
from serve.settings import ServeSettings  # noqa: E402
from tests.support.bridge_sources import Client  # noqa: E402
from tests.support.fake_openai import FakeOpenAI, running_fake_openai  # noqa: E402
from tests.support.folders import copy_fixture  # noqa: E402


def _loopback(host: Any) -> bool:
    if host in ("localhost",) or (isinstance(host, str) and host.endswith(".localhost")):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


class NetworkGuard:
    """Records (and refuses) every attempt to resolve or connect to anything but loopback."""

    def __init__(self) -> None:
        self.violations: list[str] = []

    def refuse(self, what: str) -> None:
        self.violations.append(what)
        raise OSError(f"network guard: refused {what}")


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    """A policy bug shows up as a failed test, never as traffic: name lookups and socket connects
    to anything outside 127.0.0.0/8 and ::1 are refused and fail the test at teardown."""
    guard = NetworkGuard()
    loop_class = asyncio.base_events.BaseEventLoop
    selector_class = asyncio.selector_events.BaseSelectorEventLoop
    real_getaddrinfo = loop_class.getaddrinfo
    real_sock_connect = selector_class.sock_connect

    async def getaddrinfo(self: Any, host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not _loopback(host.decode() if isinstance(host, bytes) else host):
            guard.refuse(f"lookup {host!r}")
        return await real_getaddrinfo(self, host, *args, **kwargs)

    async def sock_connect(self: Any, sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            guard.refuse(f"connect {address[0]!r}")
        await real_sock_connect(self, sock, address)

    monkeypatch.setattr(loop_class, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(selector_class, "sock_connect", sock_connect)
    yield guard
    assert guard.violations == [], f"non-loopback network access attempted: {guard.violations}"


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    """Our small OpenAI-compatible server on a loopback port (answers scripted per test)."""
    async with running_fake_openai() as server:
        yield server


@pytest.fixture
def sample_root(tmp_path: Path) -> Path:
    return copy_fixture("sample-wiki", tmp_path / "roots")


@pytest.fixture
async def serve_url(sample_root: Path, tmp_path: Path) -> Any:
    """Our serve on a copy of fixtures/sample-wiki, on a loopback port; yields its base URL."""
    server = TestServer(create_serve_app(ServeSettings(root=sample_root, cache_dir=tmp_path / "cache")),
                        host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("")).rstrip("/")
    await server.close()


@pytest.fixture
def dead_url() -> str:
    """A loopback port with nothing listening: connecting is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return tmp_path / "config" / "llmwiki-agent-bridge" / "settings.json"


@pytest.fixture
async def bridge_client(config_path: Path) -> Any:
    """Start a bridge app (persistence in a temp settings file unless overridden) and a client."""
    clients: list[Client] = []

    async def start(**overrides: Any) -> Client:
        overrides.setdefault("config_path", config_path)
        sources = overrides.pop("sources", None)
        client: Client = TestClient(TestServer(create_app(BridgeSettings(**overrides), sources),
                                               host="127.0.0.1"))
        await client.start_server()
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()
