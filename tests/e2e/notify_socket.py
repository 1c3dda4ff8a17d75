"""The receiving end of systemd's readiness protocol, as a test binds it for a service it starts."""

from __future__ import annotations

import select
import socket
import subprocess
import time
from pathlib import Path

from tests.e2e.processes import START_SECONDS


class NotifySocket:
    """A datagram socket like systemd's: a filesystem path or an abstract (`@`) name."""

    def __init__(self, sock: socket.socket, address: str) -> None:
        self.sock, self.address = sock, address

    def await_state(self, key: str, process: subprocess.Popen[bytes], stderr: Path,
                    timeout: float = START_SECONDS) -> dict[str, str]:
        """The first datagram carrying `key` (READY, STOPPING), failing if the process exits."""
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.sock], [], [], min(remaining, 0.5))
            if readable:
                fields = dict(line.split("=", 1) for line in
                              self.sock.recv(4096).decode("utf-8").splitlines() if "=" in line)
                if key in fields:
                    return fields
            elif process.poll() is not None:
                raise AssertionError(f"exited with {process.returncode} before {key}=1:\n"
                                     f"{stderr.read_text(errors='replace')[-3000:]}")
        process.kill()
        raise AssertionError(f"no {key}=1 datagram within {timeout} s")
