"""What every benchmark script shares: machine and process readings, the quiet wait, the common
command-line options, the run's deadline, child process clean-up and the report's last lines."""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


class Deadline(Exception):
    """The run's overall time limit (--max-seconds) was reached."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def proc_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a process, in MB (1e6 bytes); {} when it is gone."""
    out: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) * 1024 / 1e6
    except OSError:
        pass
    return out


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time used by the process and its exited, waited-for children
    (e.g. parse workers): less sensitive than wall time to other load on the machine."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")


def cpu_busy(interval: float = 1.0) -> float:
    """Fraction (0..1) of all CPUs busy over `interval`, from /proc/stat."""
    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as handle:
            values = [int(v) for v in handle.readline().split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        return sum(values), idle

    total0, idle0 = sample()
    time.sleep(interval)
    total1, idle1 = sample()
    total = total1 - total0
    return 0.0 if total <= 0 else 1 - (idle1 - idle0) / total


def wait_for_quiet(max_wait_s: float, threshold: float = 0.15) -> float:
    """Wait (at most `max_wait_s`) until other processes leave the CPUs mostly idle; returns
    the last busy fraction seen."""
    deadline = time.perf_counter() + max_wait_s
    busy = cpu_busy()
    while busy > threshold and time.perf_counter() < deadline:
        busy = cpu_busy()
    return busy


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_gb = 0.0
    with contextlib.suppress(OSError), open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                mem_gb = int(line.split()[1]) / 1024 / 1024
    return {"cpus": os.cpu_count(), "cpu_model": model, "mem_gib": round(mem_gb, 1),
            "python": platform.python_version(), "kernel": platform.release()}


def code_identity(code_dir: Path | None, packages: Sequence[str] = ("serve", "common")) -> dict[str, Any]:
    """Which code ran: the working tree's commit and whether `packages` differ from it, or the
    --code-dir given."""
    if code_dir is not None:
        return {"code_dir": str(code_dir), "commit": None, "dirty": None, "packages": list(packages)}

    def git(*cmd: str) -> str:
        try:
            return subprocess.run(["git", *cmd], cwd=REPO, capture_output=True, text=True,
                                  timeout=30, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"code_dir": str(REPO), "commit": git("rev-parse", "--short", "HEAD") or None,
            "dirty": bool(git("status", "--porcelain", "--", *packages)), "packages": list(packages)}


def code_lines(report: dict[str, Any]) -> str:
    """The report's last lines: which code ran, on which machine."""
    m, c = report["machine"], report["code"]
    modified = " or ".join(f"{p}/" for p in c.get("packages", ()))
    return (f"code: {c['code_dir']}" + (f" at {c['commit']}" if c["commit"] else "")
            + (f" ({modified} modified)" if c["dirty"] else "") + "\n"
            + f"machine: {m['cpus']} x {m['cpu_model']}, {m['mem_gib']} GiB, Python {m['python']}\n")


def add_run_options(parser: argparse.ArgumentParser, *, code_help: str, max_seconds: float,
                    max_seconds_help: str) -> None:
    """--code-dir, --wait-quiet, --max-seconds and --json, as every benchmark takes them."""
    parser.add_argument("--code-dir", type=Path, default=None, help=code_help)
    parser.add_argument("--wait-quiet", type=float, nargs="?", const=60.0, default=0.0,
                        metavar="SECONDS", help="before each part, wait up to SECONDS (default 60) "
                        "for other processes to leave the CPUs idle")
    parser.add_argument("--max-seconds", type=float, default=max_seconds, help=max_seconds_help)
    parser.add_argument("--json", metavar="PATH", nargs="?", const="-",
                        help="dump raw figures as JSON to PATH ('-' or no value: stdout)")


def check_code_dir(parser: argparse.ArgumentParser, args: argparse.Namespace, marker: str) -> None:
    """Resolve --code-dir and refuse one that does not hold `marker` (e.g. serve/cli.py)."""
    if args.code_dir is not None:
        args.code_dir = args.code_dir.resolve()
        if not (args.code_dir / marker).is_file():
            parser.error(f"--code-dir has no {marker}: {args.code_dir}")



def compile_code(code_dir: Path | None, packages: Sequence[str] = ("serve", "common", "bridge")) -> None:
    """Byte-compile the code the spawned services run, as `pip install` does in a deployed venv:
    with PYTHONDONTWRITEBYTECODE set, or in a checkout never imported, every start would
    otherwise compile its modules again, and the start-up figures would include that."""
    base = code_dir or REPO
    for package in packages:
        if (base / package).is_dir():
            compileall.compile_dir(base / package, quiet=1)

def install_deadline(seconds: float, message: str) -> None:
    """SIGTERM and the alarm unwind like Ctrl-C, so `finally` blocks kill children and clean up."""

    def on_alarm(_sig: int, _frame: object) -> None:
        raise Deadline(message)

    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(max(1, int(seconds)))


def kill_group(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL a child's whole process group (a server and any workers it forked) and reap it."""
    if proc is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def publish(text: str, report: Any, target: str | None) -> None:
    """A benchmark's table, and its raw figures as JSON when asked (`--json [PATH]`): the table
    goes to stderr when the JSON takes stdout."""
    (sys.stderr if target == "-" else sys.stdout).write(text)
    if target:
        write_json_report(report, target)


def write_json_report(report: Any, target: str) -> None:
    """The raw figures as JSON: to stdout for "-", else to the file `target`."""
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    if target == "-":
        sys.stdout.write(text)
    else:
        Path(target).write_text(text, encoding="utf-8")
