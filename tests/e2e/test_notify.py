"""Readiness as systemd sees it (`Type=notify`) and the start-up exposure warnings, against the
installed console scripts. The test binds the datagram socket systemd would pass in
$NOTIFY_SOCKET, so READY=1 and STOPPING=1 are observed as the service manager observes them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import SAMPLE_WIKI
from tests.e2e.notify_socket import NotifySocket
from tests.e2e.processes import STOP_SECONDS, console_script, free_port, launch

EXPOSURE_WARNINGS = ["public_bind", "any_host_allowed", "drafts_on_public_bind"]


@pytest.fixture(params=["abstract", "path"])
def notify_socket(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NotifySocket]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        if request.param == "abstract":
            name = f"llmwiki-e2e-notify-{os.getpid()}-{id(sock)}"
            sock.bind("\0" + name)
            yield NotifySocket(sock, "@" + name)
        else:
            path = tmp_path / "notify.sock"
            sock.bind(str(path))
            yield NotifySocket(sock, str(path))


def started(name: str, argv: list[Any], work: Path, notify: NotifySocket,
            env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen[bytes], Path, dict[str, str]]:
    process, _, stderr, _ = launch(name, argv, work, {**(env or {}), "NOTIFY_SOCKET": notify.address})
    return process, stderr, notify.await_state("READY", process, stderr)


def health_now(url: str, token: str = "") -> dict[str, Any]:
    """One request, no retries: READY=1 promised it answers."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(f"{url}/health", headers=headers),
                                timeout=5) as response:
        assert response.status == 200
        return dict(json.loads(response.read()))


def query_now(url: str) -> dict[str, Any]:
    request = urllib.request.Request(f"{url}/query", data=json.dumps({"query": "release"}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200
        return dict(json.loads(response.read()))


def _json(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def stopped(process: subprocess.Popen[bytes], stderr: Path, notify: NotifySocket) -> dict[str, str]:
    process.send_signal(signal.SIGTERM)
    state = notify.await_state("STOPPING", process, stderr, timeout=STOP_SECONDS)
    assert process.wait(STOP_SECONDS) == 0, stderr.read_text(errors="replace")[-3000:]
    return state


def warnings_logged(stderr: Path) -> list[str]:
    """The warning events of the JSON log lines (stderr is not a terminal)."""
    return [str(e.get("event")) for e in map(_json, stderr.read_text(errors="replace").splitlines())
            if e.get("level") == "warning"]


def test_serve_is_ready_when_it_answers_and_says_when_it_stops(tmp_path: Path,
                                                              notify_socket: NotifySocket) -> None:
    port = free_port()
    process, stderr, ready = started("serve", [console_script("llmwiki-serve"), "serve", SAMPLE_WIKI,
                                               "--host", "127.0.0.1", "--port", port],
                                     tmp_path, notify_socket)
    try:
        url = f"http://127.0.0.1:{port}"
        assert ready["READY"] == "1" and ready["STATUS"] == f"ready: {url}"
        assert health_now(url)["status"] == "ok"
        assert query_now(url)["page_count"] > 0  # the index is built: the first query answers
        # The journal's line for the same moment, logged just before READY=1.
        [line] = [e for e in map(_json, stderr.read_text(errors="replace").splitlines())
                  if e.get("event") == "ready"]
        assert line["url"] == url and line["index_ready"] is True
        state = stopped(process, stderr, notify_socket)
        assert state["STOPPING"] == "1"
        assert warnings_logged(stderr) == []  # loopback: nothing to warn about
    finally:
        process.kill()


def test_the_bridge_is_ready_when_it_listens_and_says_when_it_stops(tmp_path: Path,
                                                                   notify_socket: NotifySocket) -> None:
    argv = [console_script("llmwiki-agent-bridge"), "serve", "--host", "127.0.0.1", "--port", "0",
            "--config", tmp_path / "settings.json"]
    process, stderr, ready = started("bridge", argv, tmp_path, notify_socket)
    try:
        assert ready["READY"] == "1" and ready["STATUS"].startswith("ready: http://127.0.0.1:")
        url = ready["STATUS"].removeprefix("ready: ")
        assert health_now(url)["status"] == "ok"
        assert stopped(process, stderr, notify_socket)["STOPPING"] == "1"
        assert warnings_logged(stderr) == []
    finally:
        process.kill()


@pytest.mark.parametrize("notify_socket", ["abstract"], indirect=True)
def test_serve_warns_once_for_each_exposure(tmp_path: Path, notify_socket: NotifySocket) -> None:
    """Bound to every address (reached over loopback only here), Host check off, drafts offered."""
    port = free_port()
    process, stderr, _ = started("serve", [console_script("llmwiki-serve"), "serve", SAMPLE_WIKI,
                                           "--host", "0.0.0.0", "--port", port, "--allowed-host", "*",
                                           "--allow-drafts"], tmp_path, notify_socket)
    try:
        assert health_now(f"http://127.0.0.1:{port}")["status"] == "ok"
        stopped(process, stderr, notify_socket)
        assert warnings_logged(stderr) == EXPOSURE_WARNINGS
    finally:
        process.kill()


@pytest.mark.parametrize("notify_socket", ["abstract"], indirect=True)
def test_serve_warns_about_any_host_on_loopback_too(tmp_path: Path, notify_socket: NotifySocket) -> None:
    port = free_port()
    process, stderr, _ = started("serve", [console_script("llmwiki-serve"), "serve", SAMPLE_WIKI,
                                           "--host", "127.0.0.1", "--port", port, "--allowed-host", "*",
                                           "--allow-drafts"], tmp_path, notify_socket)
    try:
        stopped(process, stderr, notify_socket)
        assert warnings_logged(stderr) == ["any_host_allowed"]
    finally:
        process.kill()


@pytest.mark.parametrize("notify_socket", ["abstract"], indirect=True)
def test_the_bridge_warns_about_a_public_bind(tmp_path: Path, notify_socket: NotifySocket) -> None:
    argv = [console_script("llmwiki-agent-bridge"), "serve", "--host", "0.0.0.0", "--port", "0",
            "--allow-public-bind", "--config", tmp_path / "settings.json"]
    process, stderr, ready = started("bridge", argv, tmp_path, notify_socket,
                                     env={"LLMWIKI_AGENT_BRIDGE_BEARER_TOKEN": "e2e-token"})
    try:
        port = ready["STATUS"].rsplit(":", 1)[1]
        assert health_now(f"http://127.0.0.1:{port}", token="e2e-token")["status"] == "ok"
        stopped(process, stderr, notify_socket)
        assert warnings_logged(stderr) == ["public_bind"]
    finally:
        process.kill()
