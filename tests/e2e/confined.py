"""Run a command under the confinement a unit file asks systemd for, without systemd: its
SystemCallFilter= allow list (with SystemCallErrorNumber=EPERM), its RestrictAddressFamilies= for
socket(2), and MemoryDenyWriteExecute= the way systemd enforces it, as a second seccomp filter
refusing writable-and-executable mappings and making memory executable later.

Usage: python confined.py ALLOWED_SYSCALLS_FILE FAMILY[,FAMILY...] -- COMMAND [ARG...]
Test instrumentation: libseccomp through ctypes, then exec; nothing of the product is imported."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket
import sys

_PR_SET_NO_NEW_PRIVS = 38
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_EQ = 4
_SCMP_CMP_MASKED_EQ = 7
_PROT_WRITE, _PROT_EXEC = 0x2, 0x4
_SHM_EXEC = 0o100000
# syscall, argument, mask, value: refused when `argument & mask == value` (systemd's W^X rules).
_WX_RULES = (("mmap", 2, _PROT_WRITE | _PROT_EXEC, _PROT_WRITE | _PROT_EXEC),
             ("mprotect", 2, _PROT_EXEC, _PROT_EXEC),
             ("pkey_mprotect", 2, _PROT_EXEC, _PROT_EXEC),
             ("shmat", 2, _SHM_EXEC, _SHM_EXEC))


def _errno_action(errno: int) -> int:
    return 0x00050000 | (errno & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def _libseccomp() -> ctypes.CDLL:
    seccomp = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    seccomp.seccomp_init.restype = ctypes.c_void_p
    seccomp.seccomp_init.argtypes = [ctypes.c_uint32]
    seccomp.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    seccomp.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                               ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    seccomp.seccomp_load.argtypes = [ctypes.c_void_p]
    return seccomp


def _add(seccomp: ctypes.CDLL, context: int, action: int, name: str,
         compare: _ArgCmp | None = None) -> None:
    number = seccomp.seccomp_syscall_resolve_name(name.encode())
    if number < 0:
        return  # not a call of this architecture
    result = seccomp.seccomp_rule_add_array(context, action, number, 0 if compare is None else 1,
                                            None if compare is None else ctypes.byref(compare))
    if result != 0:
        raise SystemExit(f"confined: cannot add a rule for {name}")


def confine(allowed: list[str], families: list[str]) -> None:
    """Two filters, as systemd loads them; the kernel applies the stricter answer of the two."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit("confined: PR_SET_NO_NEW_PRIVS failed")
    seccomp = _libseccomp()
    refuse = _errno_action(1)  # EPERM, as SystemCallErrorNumber=EPERM and systemd's W^X rules
    calls = seccomp.seccomp_init(refuse)
    for name in allowed:
        if name != "socket":
            _add(seccomp, calls, _SCMP_ACT_ALLOW, name)
    if "socket" in allowed:
        for family in families:
            _add(seccomp, calls, _SCMP_ACT_ALLOW, "socket",
                 _ArgCmp(0, _SCMP_CMP_EQ, int(getattr(socket, family)), 0))
    wx = seccomp.seccomp_init(_SCMP_ACT_ALLOW)
    for name, argument, mask, value in _WX_RULES:
        _add(seccomp, wx, refuse, name, _ArgCmp(argument, _SCMP_CMP_MASKED_EQ, mask, value))
    for context in (wx, calls):
        if seccomp.seccomp_load(context) != 0:
            raise SystemExit("confined: seccomp_load failed")


def main(argv: list[str]) -> None:
    calls_file, families, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit(__doc__)
    with open(calls_file, encoding="utf-8") as calls:
        allowed = [line.strip() for line in calls if line.strip()]
    confine(allowed, families.split(","))
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
