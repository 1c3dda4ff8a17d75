"""The systemd units in deploy/: they load (`systemd-analyze verify`), they are hardened
(`systemd-analyze security --offline=yes` at most 2.0 each), they name only variables the
services read, and both installed services work under the units' syscall filter, address
families and W^X policy.

`verify` wants every ExecStart binary to exist, so the units are checked as installed copies:
`/opt/llmwiki/.venv/bin/` becomes this test environment's bin directory (where the console
scripts are), and the template is also checked as an instance (`llmwiki-serve@notes.service`).
systemd-analyze is installed here if the machine lacks it (apt-get, as scripts/bootstrap does for
Chromium); a machine where that fails fails this module, it never skips."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import REPO
from tests.e2e.notify_socket import NotifySocket
from tests.e2e.processes import Service, console_script, free_port, launch, run_command, stop_checked

DEPLOY = REPO / "deploy"
UNITS = ("llmwiki-serve@.service", "llmwiki-agent-bridge.service")
INSTALLED_BIN = "/opt/llmwiki/.venv/bin/"
MAX_EXPOSURE = 2.0
CONFINED = Path(__file__).resolve().parent / "confined.py"
ENV_NAME = re.compile(r"\bLLMWIKI_[A-Z0-9_]+")


def _install_systemd_analyze() -> None:
    as_root = [] if os.geteuid() == 0 else ["sudo"]
    install = [*as_root, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q",
               "--no-install-recommends", "systemd"]
    if subprocess.run(install, capture_output=True, check=False).returncode != 0:
        subprocess.run([*as_root, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "update", "-q"],
                       capture_output=True, check=False)
        subprocess.run(install, capture_output=True, check=False)


@pytest.fixture(scope="module")
def analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        _install_systemd_analyze()
        found = shutil.which("systemd-analyze")
    if found is None:
        pytest.fail("systemd-analyze is missing and `apt-get install systemd` did not provide it")
    return found


@pytest.fixture(scope="module")
def installed_units(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The units as installed over this environment's console scripts, plus a template instance."""
    directory = tmp_path_factory.mktemp("units")
    bin_dir = f"{Path(sys.executable).parent}/"
    copies = {}
    for name in UNITS:
        text = (DEPLOY / name).read_text(encoding="utf-8")
        assert INSTALLED_BIN in text, f"{name} no longer starts {INSTALLED_BIN}..."
        (directory / name).write_text(text.replace(INSTALLED_BIN, bin_dir), encoding="utf-8")
        copies[name] = directory / name
    instance = directory / "llmwiki-serve@notes.service"
    shutil.copy(copies["llmwiki-serve@.service"], instance)
    copies[instance.name] = instance
    return copies


def service_settings(path: Path) -> dict[str, list[str]]:
    """The [Service] section's settings, each key's values in order."""
    settings: dict[str, list[str]] = {}
    section = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]":
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


@pytest.mark.parametrize("unit", [*UNITS, "llmwiki-serve@notes.service"])
def test_the_unit_loads_without_a_complaint(analyze: str, installed_units: dict[str, Path],
                                            unit: str) -> None:
    # An unknown or misspelt key is only a warning (exit status 0): any output fails the test.
    done = subprocess.run([analyze, "verify", "--man=no", str(installed_units[unit])],
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


@pytest.mark.parametrize("unit", UNITS)
def test_the_unit_is_rated_at_most_2(analyze: str, unit: str) -> None:
    done = subprocess.run([analyze, "security", "--offline=yes", f"--threshold={int(MAX_EXPOSURE * 10)}",
                           str(DEPLOY / unit)], capture_output=True, text=True, timeout=60, check=False)
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d)", done.stdout)
    assert found, done.stdout + done.stderr
    exposure = float(found.group(1))
    assert exposure <= MAX_EXPOSURE, done.stdout
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("unit", "example", "script"), [
    ("llmwiki-serve@.service", "serve.env.example", "llmwiki-serve"),
    ("llmwiki-agent-bridge.service", "agent-bridge.env.example", "llmwiki-agent-bridge"),
])
def test_units_and_env_files_name_only_variables_the_service_reads(tmp_path: Path, unit: str, example: str,
                                                                   script: str) -> None:
    help_args = ["serve", "--help"] if script == "llmwiki-serve" else ["--help"]
    done = run_command(tmp_path, [console_script(script), *help_args])
    assert done.returncode == 0, done.stderr
    known = set(ENV_NAME.findall(done.stdout))
    settings = service_settings(DEPLOY / unit)
    known |= set(ENV_NAME.findall(" ".join(settings["ExecStart"])))  # ROOT comes in on the command line
    named = set(ENV_NAME.findall((DEPLOY / unit).read_text() + (DEPLOY / example).read_text()))
    assert named and named <= known, f"not read by {script}: {sorted(named - known)}"


def test_the_units_promise_readiness_and_keep_state_where_systemd_gives_it() -> None:
    serve, bridge = (service_settings(DEPLOY / u) for u in UNITS)
    for settings in (serve, bridge):
        assert settings["Type"] == ["notify"] and settings["DynamicUser"] == ["yes"]
        assert settings["ExecStart"][0].startswith(INSTALLED_BIN)
    assert serve["EnvironmentFile"] == ["/etc/llmwiki/serve-%i.env"]
    assert serve["CacheDirectory"] == ["llmwiki-serve/%i"]
    assert "LLMWIKI_SERVE_CACHE_DIR=%C/llmwiki-serve/%i" in serve["Environment"]
    assert bridge["StateDirectory"] == ["llmwiki-agent-bridge"]
    assert "LLMWIKI_AGENT_BRIDGE_CONFIG_PATH=%S/llmwiki-agent-bridge/settings.json" in bridge["Environment"]


# -- the services under the units' confinement ------------------------------------------------

def syscall_groups(analyze: str) -> dict[str, list[str]]:
    """systemd's named syscall sets (`@system-service`, ...), as this systemd defines them."""
    done = subprocess.run([analyze, "syscall-filter"], capture_output=True, text=True, timeout=60, check=True)
    groups: dict[str, list[str]] = {}
    current: list[str] = []
    for line in done.stdout.splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.strip(), [])
        elif line.startswith(" ") and line.strip() and not line.strip().startswith("#"):
            current.append(line.strip())
    return groups


def expand(name: str, groups: dict[str, list[str]]) -> set[str]:
    if not name.startswith("@"):
        return {name}
    return set().union(*(expand(member, groups) for member in groups[name]))


def allowed_syscalls(unit: Path, groups: dict[str, list[str]]) -> set[str]:
    """The allow list systemd builds from the unit's SystemCallFilter= lines (in order, `~` lines
    taking away; an allow list always holds @default)."""
    allowed = expand("@default", groups)
    values = service_settings(unit)["SystemCallFilter"]
    assert not values[0].startswith("~"), "the filter is expected to be an allow list"
    for value in values:
        names = set().union(*(expand(n, groups) for n in value.lstrip("~").split()))
        allowed = allowed - names if value.startswith("~") else allowed | names
    return allowed


def confined(tmp_path: Path, analyze: str, unit: str, command: list[str | Path]) -> list[str | Path]:
    """`command` run through confined.py with `unit`'s syscall filter and address families."""
    calls = tmp_path / f"{unit}.syscalls"
    calls.write_text("\n".join(sorted(allowed_syscalls(DEPLOY / unit, syscall_groups(analyze)))))
    settings = service_settings(DEPLOY / unit)
    assert settings["MemoryDenyWriteExecute"] == ["yes"] and settings["SystemCallErrorNumber"] == ["EPERM"]
    families = ",".join(settings["RestrictAddressFamilies"][0].split())
    return [sys.executable, CONFINED, calls, families, "--", *command]


def generated_folder(root: Path, pages: int) -> Path:
    """Enough pages that serve parses and indexes in forked worker processes."""
    root.mkdir(parents=True)
    for n in range(pages):
        (root / f"page-{n:04d}.md").write_text(
            f"# Component {n}\n\nRelease notes for component {n}: build, sign and ship it.\n\n"
            f"See [[page-{(n + 1) % pages:04d}]].\n", encoding="utf-8")
    return root


@pytest.fixture()
def notify(tmp_path: Path) -> Iterator[NotifySocket]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(tmp_path / "notify.sock"))
        yield NotifySocket(sock, str(tmp_path / "notify.sock"))


def test_both_services_work_under_the_units_confinement(analyze: str, tmp_path: Path,
                                                       notify: NotifySocket) -> None:
    folder = generated_folder(tmp_path / "wiki", 2500)
    port = free_port()
    env = {"NOTIFY_SOCKET": notify.address}
    serve_argv = confined(tmp_path, analyze, "llmwiki-serve@.service",
                          [console_script("llmwiki-serve"), "serve", folder, "--host", "127.0.0.1",
                           "--port", str(port)])
    process, out, err, guard = launch("serve", serve_argv, tmp_path / "serve", env)
    serve = Service("serve", f"http://127.0.0.1:{port}", process, out, err, guard)
    bridge = None
    try:
        notify.await_state("READY", process, err)
        pack = httpx.post(f"{serve.url}/query", json={"query": "release notes component 7"}, timeout=30)
        assert pack.status_code == 200 and pack.json()["page_count"] == 2500, pack.text

        bridge_argv = confined(tmp_path, analyze, "llmwiki-agent-bridge.service",
                               [console_script("llmwiki-agent-bridge"), "serve", "--host", "127.0.0.1",
                                "--port", "0", "--config", tmp_path / "bridge-settings.json"])
        process, out, err, guard = launch("bridge", bridge_argv, tmp_path / "bridge", env)
        ready = notify.await_state("READY", process, err)
        bridge = Service("bridge", ready["STATUS"].removeprefix("ready: "), process, out, err, guard)
        source = {"id": "wiki", "name": "Wiki", "protocol": "llmwiki-http", "status": "ready",
                  "url": serve.url}
        answer = httpx.post(f"{bridge.url}/message:send", timeout=60,
                            json={"query": "How is a component shipped?", "mode": "evidence-only",
                                  "knowledgeSources": [source]})
        assert answer.status_code == 200, answer.text
        result = answer.json()["artifacts"][0]["parts"][0]["data"]
        [tool] = [s for s in result["steps"] if s["id"].startswith("tool-")]
        assert tool["status"] == "done" and tool["citationIds"], json.dumps(result)[:2000]
    finally:
        for service in (bridge, serve):
            if service is not None:
                stop_checked(service)


def test_the_confinement_is_real(analyze: str, tmp_path: Path) -> None:
    """What the services are spared: W+X memory, a call outside the allow list, a netlink socket."""
    probe = ("import mmap, os, socket\n"
             "for attempt in (lambda: mmap.mmap(-1, 4096, prot=7),\n"
             "                lambda: os.setpriority(os.PRIO_PROCESS, 0, 5),\n"
             "                lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)):\n"
             "    try:\n"
             "        attempt()\n"
             "        print('allowed')\n"
             "    except OSError as exc:\n"
             "        print(exc.errno)\n")
    done = run_command(tmp_path, confined(tmp_path, analyze, "llmwiki-serve@.service",
                                          [sys.executable, "-c", probe]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(errno.EPERM)] * 3
