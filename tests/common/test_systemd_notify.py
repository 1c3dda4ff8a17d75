"""The sd_notify sender against a datagram socket the test binds, in both address forms."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from common import systemd_notify


@pytest.fixture()
def abstract_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    name = f"llmwiki-notify-unit-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        yield sock


def test_ready_sends_ready_and_status_in_one_datagram(abstract_socket: socket.socket) -> None:
    assert systemd_notify.ready("ready: http://127.0.0.1:8765")
    assert abstract_socket.recv(4096) == b"READY=1\nSTATUS=ready: http://127.0.0.1:8765"


def test_stopping(abstract_socket: socket.socket) -> None:
    assert systemd_notify.stopping()
    assert abstract_socket.recv(4096) == b"STOPPING=1\nSTATUS=stopping"


def test_a_status_with_newlines_stays_one_assignment(abstract_socket: socket.socket) -> None:
    assert systemd_notify.notify(STATUS="one\nREADY=1")
    assert abstract_socket.recv(4096) == b"STATUS=one READY=1"


def test_a_filesystem_socket_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        assert systemd_notify.ready("ready")
        assert sock.recv(4096) == b"READY=1\nSTATUS=ready"


@pytest.mark.parametrize("value", ["", "vsock:2:1234", "relative/path"])
def test_nothing_is_sent_without_a_usable_address(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", value)
    assert systemd_notify.ready("ready") is False


def test_unset_means_outside_systemd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert systemd_notify.stopping() is False


def test_a_socket_nobody_listens_on_is_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "gone"))
    assert systemd_notify.ready("ready") is False
