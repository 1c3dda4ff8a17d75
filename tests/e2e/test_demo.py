"""`./scripts/run-demo` as a newcomer meets it: a taken port is one line at once, Ctrl-C stops it at
any moment, and the banner comes only once both services answer."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO
from tests.e2e.processes import STOP_SECONDS, free_port, service_env

DEMO = REPO / "scripts" / "run-demo"
QUICK_SECONDS = 10.0  # a refusal or a Ctrl-C answered this fast (a loaded machine included)
START_SECONDS = 90.0


def _demo(work: Path, env: Mapping[str, str]) -> subprocess.Popen[str]:
    """The demo in its own process group, as a terminal runs it: Ctrl-C is SIGINT to the group.
    SIGINT is reset to its default, as an interactive shell would (a test run in the background
    inherits it ignored)."""
    full = service_env(work, {"LLMWIKI_DEMO_STATE_DIR": str(work / "demo-state"), **env})
    return subprocess.Popen([str(DEMO)], cwd=work, env=full, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _read_until(demo: subprocess.Popen[str], marker: str) -> list[str]:
    """The demo's lines up to and including the first that contains `marker`."""
    assert demo.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + START_SECONDS
    for line in demo.stdout:
        lines.append(line)
        if marker in line:
            return lines
        assert time.monotonic() < deadline, "".join(lines)
    raise AssertionError(f"the demo ended before {marker!r}:\n{''.join(lines)}")


def _finish(demo: subprocess.Popen[str], seconds: float) -> str:
    try:
        rest, _ = demo.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGKILL)
        demo.communicate()
        raise AssertionError(f"the demo did not stop within {seconds} s") from None
    return rest


def _free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _answers(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return bool(answer.status == 200)


@pytest.fixture
def ports() -> dict[str, str]:
    return {"LLMWIKI_SERVE_PORT": str(free_port()), "LLMWIKI_AGENT_BRIDGE_PORT": str(free_port())}


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port held by something that listens and never answers (the six-minute case before)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        yield int(holder.getsockname()[1])


@pytest.mark.parametrize("variable", ["LLMWIKI_SERVE_PORT", "LLMWIKI_AGENT_BRIDGE_PORT"])
def test_a_taken_port_is_one_line_at_once(tmp_path: Path, ports: dict[str, str], silent_listener: int,
                                          variable: str) -> None:
    started = time.monotonic()
    demo = _demo(tmp_path, {**ports, variable: str(silent_listener)})
    output = _finish(demo, QUICK_SECONDS)
    assert demo.returncode == 1, output
    assert time.monotonic() - started < QUICK_SECONDS
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert f"port {silent_listener}" in lines[0] and "in use" in lines[0], lines[0]
    assert f"{variable}={silent_listener + 1}" in lines[0], "the line says what to do"
    assert "Try:" not in output


def test_the_banner_comes_when_both_answer_and_ctrl_c_stops_both(tmp_path: Path,
                                                                  ports: dict[str, str]) -> None:
    demo = _demo(tmp_path, ports)
    try:
        lines = _read_until(demo, "Try:")
        serve = f"http://127.0.0.1:{ports['LLMWIKI_SERVE_PORT']}"
        bridge = f"http://127.0.0.1:{ports['LLMWIKI_AGENT_BRIDGE_PORT']}"
        assert _answers(f"{serve}/health?ready=1") and _answers(f"{bridge}/health"), "".join(lines)
        text = "".join(lines)
        assert text.index("starting llmwiki-agent-bridge") < text.index(f"llmwiki-agent-bridge: {bridge}")
        os.killpg(demo.pid, signal.SIGINT)
        _finish(demo, QUICK_SECONDS + STOP_SECONDS)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
    assert demo.returncode == 130
    assert _free(int(ports["LLMWIKI_SERVE_PORT"])) and _free(int(ports["LLMWIKI_AGENT_BRIDGE_PORT"]))


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_while_serve_starts_stops_at_once(tmp_path: Path, ports: dict[str, str],
                                                 signum: signal.Signals, status: int) -> None:
    """Ctrl-C (SIGINT to the group) or SIGTERM while serve is still loading."""
    demo = _demo(tmp_path, ports)
    try:
        _read_until(demo, "starting llmwiki-serve")
        if signum == signal.SIGINT:
            os.killpg(demo.pid, signum)
        else:
            demo.send_signal(signum)
        rest = _finish(demo, QUICK_SECONDS)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
    assert demo.returncode == status, rest
    assert "Try:" not in rest
    deadline = time.monotonic() + STOP_SECONDS
    while not _free(int(ports["LLMWIKI_SERVE_PORT"])):  # the serve it started is gone too
        assert time.monotonic() < deadline, "serve still holds its port after Ctrl-C"
        time.sleep(0.05)


def test_no_banner_when_the_bridge_does_not_come_up(tmp_path: Path, ports: dict[str, str]) -> None:
    demo = _demo(tmp_path, {**ports, "LLMWIKI_AGENT_BRIDGE_SOURCE_POLICY": "no-such-policy"})
    output = _finish(demo, START_SECONDS)
    assert demo.returncode == 1, output
    assert "Try:" not in output
    assert "llmwiki-agent-bridge exited before it answered" in output, output
    assert _free(int(ports["LLMWIKI_SERVE_PORT"])), "the serve it started was stopped"
