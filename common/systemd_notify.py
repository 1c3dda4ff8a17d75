"""systemd's readiness protocol (sd_notify): state datagrams to $NOTIFY_SOCKET when it is set.

Under `Type=notify` systemd passes the address of a datagram socket; a service sends `READY=1`
when it can do its job, `STATUS=...` for `systemctl status`, `STOPPING=1` when it begins to shut
down. Outside systemd the variable is unset and every call here does nothing."""

from __future__ import annotations

import os
import socket

ENV = "NOTIFY_SOCKET"


def _address(value: str) -> str | None:
    """A filesystem path, or `@name` for Linux's abstract namespace (a leading NUL byte).
    Other forms (vsock:) are not ours to speak."""
    if value.startswith("@"):
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    return None


def notify(**fields: str) -> bool:
    """Send `KEY=value` lines (READY="1", STATUS="...") in one datagram; whether one was sent.
    A failure to send is not the service's failure: systemd then times the start out itself."""
    address = _address(os.environ.get(ENV, ""))
    if address is None or not fields:
        return False
    # One line per field: a value must not smuggle in a second assignment.
    message = "\n".join(f"{key}={' '.join(str(value).splitlines())}" for key, value in fields.items())
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode("utf-8"))
    except OSError:
        return False
    return True


def ready(status: str) -> bool:
    return notify(READY="1", STATUS=status)


def stopping(status: str = "stopping") -> bool:
    return notify(STOPPING="1", STATUS=status)
