"""Start the installed console scripts as subprocesses on loopback, as systemd runs them, and stop them.

Nothing here imports product modules: the processes are found on the PATH of the virtual
environment the tests run in, and talked to over sockets only."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

GUARD_DIR = Path(__file__).resolve().parent / "guard"
START_SECONDS = 60.0  # a cold start on a busy 2-core machine, with margin
STOP_SECONDS = 10.0
POLL_SECONDS = 0.05
# Variables of either service (and of the runtime client) that must not leak in from the outer shell.
_OWN_PREFIXES = ("LLMWIKI_", "HERMES_", "OPENAI_", "E2E_")


def console_script(name: str, bin_dir: Path | None = None) -> Path:
    """An installed console script of the environment the tests run in (or of `bin_dir`)."""
    path = (bin_dir or Path(sys.executable).parent) / name
    if not path.exists():
        pytest.fail(f"{name} is not installed in {path.parent}: run ./scripts/bootstrap test")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Service:
    """One running service process: its base URL, its logs and its network-guard record."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path
    guard_log: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    def logs(self) -> str:
        out = self.stdout.read_text(errors="replace")[-4000:]
        err = self.stderr.read_text(errors="replace")[-4000:]
        return f"--- {self.name} stdout ---\n{out}\n--- {self.name} stderr ---\n{err}"

    def log_events(self) -> list[dict[str, Any]]:
        """The JSON log lines it wrote on stderr, in order."""
        return json_lines(self.stderr)

    def guard_violations(self) -> list[str]:
        if not self.guard_log.exists():
            return []
        return [line for line in self.guard_log.read_text().splitlines() if line]

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError(f"{self.name} has no VmRSS (exited?)")

    def stop(self) -> int:
        """SIGTERM, as systemd stops a unit; the exit status (killed after STOP_SECONDS)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_SECONDS)
        return int(self.process.returncode)


def stop_checked(service: Service) -> None:
    """Stop with SIGTERM, as systemd stops a unit, and fail the test if the service tried to reach
    beyond loopback, exited uncleanly or wrote a traceback."""
    violations = service.guard_violations()
    status = service.stop()
    assert not violations, f"{service.name} tried to reach beyond loopback: {violations}"
    assert status in (0, -15), f"{service.name} exited with {status}\n{service.logs()}"
    assert "Traceback" not in service.stderr.read_text(errors="replace"), service.logs()


def service_env(work: Path, extra: Mapping[str, str] | None = None,
                fake_dns: Mapping[str, Sequence[str]] | None = None) -> dict[str, str]:
    """A clean environment: HOME in the test's directory, none of the services' variables from the
    outer shell, the network guard on the Python path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN_PREFIXES)}
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env["XDG_STATE_HOME"] = str(home / ".local" / "state")
    env["PYTHONPATH"] = str(GUARD_DIR)
    env["PYTHONUNBUFFERED"] = "1"
    env["NO_PROXY"] = env["no_proxy"] = "*"
    env["E2E_FAKE_DNS"] = json.dumps({k.lower(): list(v) for k, v in (fake_dns or {}).items()})
    env.update(extra or {})
    return env


Launched = tuple[subprocess.Popen[bytes], Path, Path, Path]  # process, stdout, stderr, guard record


def launch(name: str, argv: Sequence[str | Path], work: Path, env: Mapping[str, str] | None = None,
           fake_dns: Mapping[str, Sequence[str]] | None = None) -> Launched:
    work.mkdir(parents=True, exist_ok=True)
    stdout, stderr, guard_log = work / f"{name}.stdout", work / f"{name}.stderr", work / f"{name}.guard"
    full_env = service_env(work, env, fake_dns)
    full_env["E2E_GUARD_LOG"] = str(guard_log)
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen([str(a) for a in argv], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                   env=full_env, cwd=work)
    return process, stdout, stderr, guard_log


def _exited(name: str, process: subprocess.Popen[bytes], stdout: Path, stderr: Path) -> None:
    raise AssertionError(f"{name} exited with {process.returncode} before it was ready:\n"
                         f"{stdout.read_text(errors='replace')[-3000:]}\n{stderr.read_text(errors='replace')[-3000:]}")


def wait_http_ok(name: str, url: str, process: subprocess.Popen[bytes], stdout: Path, stderr: Path,
                 timeout: float = START_SECONDS) -> None:
    """Until `url` answers 200 (the service's readiness signal), failing as soon as it exits."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            _exited(name, process, stdout, stderr)
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"{name} did not answer {url} within {timeout} s")
        time.sleep(POLL_SECONDS)


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The lines of a log file that are JSON objects (structlog's), skipping any other text."""
    events = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def wait_ready_line(name: str, process: subprocess.Popen[bytes], stdout: Path, stderr: Path,
                    timeout: float = START_SECONDS) -> dict[str, Any]:
    """The `{"event": "ready", ...}` line the bridge prints on stdout when it listens."""
    deadline = time.monotonic() + timeout
    while True:
        for event in json_lines(stdout):
            if event.get("event") == "ready":
                return event
        if process.poll() is not None:
            _exited(name, process, stdout, stderr)
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"{name} printed no ready line within {timeout} s")
        time.sleep(POLL_SECONDS)


def start_serve(work: Path, root: Path, *args: str, script: Path | None = None, name: str = "serve",
                env: Mapping[str, str] | None = None) -> Service:
    """`llmwiki-serve serve ROOT --host 127.0.0.1 --port P ...`, ready once `/health?ready=1`
    answers 200 (queries are answered without waiting for the index)."""
    port = free_port()
    argv = [script or console_script("llmwiki-serve"), "serve", root, "--host", "127.0.0.1",
            "--port", str(port), *args]
    process, stdout, stderr, guard = launch(name, argv, work, env)
    url = f"http://127.0.0.1:{port}"
    wait_http_ok(name, url + "/health?ready=1", process, stdout, stderr)
    return Service(name, url, process, stdout, stderr, guard)


def start_bridge(work: Path, *args: str, settings: Mapping[str, Any] | None = None, name: str = "bridge",
                 env: Mapping[str, str] | None = None,
                 fake_dns: Mapping[str, Sequence[str]] | None = None) -> Service:
    """`llmwiki-agent-bridge serve --host 127.0.0.1 --port 0 --config <work>/settings.json ...` with a
    fresh settings file (written from `settings` when given); ready at its ready line."""
    config = work / f"{name}-settings.json"
    if settings is not None:
        config.write_text(json.dumps(settings), encoding="utf-8")
    argv = [console_script("llmwiki-agent-bridge"), "serve", "--host", "127.0.0.1", "--port", "0",
            "--config", config, *args]
    process, stdout, stderr, guard = launch(name, argv, work, env, fake_dns)
    ready = wait_ready_line(name, process, stdout, stderr)
    return Service(name, str(ready["url"]), process, stdout, stderr, guard,
                   {"config": config, "ready": ready})


def run_command(work: Path, argv: Sequence[str | Path], env: Mapping[str, str] | None = None,
                timeout: float = START_SECONDS) -> subprocess.CompletedProcess[str]:
    """A one-shot command (`status --probe`, ...) in the same clean environment."""
    work.mkdir(parents=True, exist_ok=True)
    full_env = service_env(work, env)
    full_env["E2E_GUARD_LOG"] = str(work / "command.guard")
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=full_env, cwd=work,
                          timeout=timeout, check=False)
