"""Run a command under the confinement a unit file asks systemd for, without systemd: its
SystemCallFilter= allow list (with SystemCallErrorNumber=EPERM), its RestrictAddressFamilies= for
socket(2), and MemoryDenyWriteExecute= as the kernel's own W^X switch (PR_SET_MDWE, which refuses
writable-executable mappings and making memory executable later, as systemd's seccomp rules do).

Usage: python confined.py ALLOWED_SYSCALLS_FILE FAMILY[,FAMILY...] -- COMMAND [ARG...]
Test instrumentation: libseccomp through ctypes, then exec; nothing of the product is imported."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket
import sys

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_MDWE = 65
_PR_MDWE_REFUSE_EXEC_GAIN = 1
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_EQ = 4


def _errno_action(errno: int) -> int:
    return 0x00050000 | (errno & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def confine(allowed: list[str], families: list[str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_MDWE, _PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        raise SystemExit(f"confined: PR_SET_MDWE failed (errno {ctypes.get_errno()})")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit("confined: PR_SET_NO_NEW_PRIVS failed")
    seccomp = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    seccomp.seccomp_init.restype = ctypes.c_void_p
    seccomp.seccomp_init.argtypes = [ctypes.c_uint32]
    seccomp.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    seccomp.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                               ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    seccomp.seccomp_load.argtypes = [ctypes.c_void_p]
    context = seccomp.seccomp_init(_errno_action(1))  # EPERM, as SystemCallErrorNumber=EPERM
    for name in allowed:
        number = seccomp.seccomp_syscall_resolve_name(name.encode())
        if number < 0 or name == "socket":  # not a call of this architecture; socket: below
            continue
        if seccomp.seccomp_rule_add_array(context, _SCMP_ACT_ALLOW, number, 0, None) != 0:
            raise SystemExit(f"confined: cannot allow {name}")
    if "socket" in allowed:
        number = seccomp.seccomp_syscall_resolve_name(b"socket")
        for family in families:
            compare = _ArgCmp(0, _SCMP_CMP_EQ, int(getattr(socket, family)), 0)
            if seccomp.seccomp_rule_add_array(context, _SCMP_ACT_ALLOW, number, 1,
                                              ctypes.byref(compare)) != 0:
                raise SystemExit(f"confined: cannot allow socket({family})")
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
