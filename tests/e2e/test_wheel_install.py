"""Installed like a tool: the wheel built from the checkout (without a warning of our own making)
installs into a fresh virtual environment with pip, as a pipx tool and as a uv tool, and both
console scripts work from there, with the settings page's bundled files, from another directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, SAMPLE_WIKI
from tests.e2e.processes import Service, launch, run_command, start_serve, stop_checked, wait_ready_line

INSTALL_SECONDS = 900.0  # a cold dependency install on a loaded machine
# Build output that would mean our configuration is at fault (setuptools' package-discovery and
# package-data warnings among them); the build backend's warnings all carry one of these.
OWN_WARNINGS = ("BuildBackendWarning", "SetuptoolsDeprecationWarning", "is absent from the `packages`",
                "Package would be ignored", "warning: no files found")
NOT_SHIPPED = (".venv", ".git", ".demo", "build", "dist", "node_modules", "__pycache__", "*.egg-info",
               ".pytest_cache", ".mypy_cache", ".ruff_cache")


def _run(argv: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=False,
                          timeout=INSTALL_SECONDS, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{argv}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built as a user would from a checkout (a copy, so the tree stays clean)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "checkout"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SHIPPED), symlinks=True)
    done = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", work / "dist",
                 "--verbose", source])
    output = done.stdout + done.stderr
    assert not [w for w in OWN_WARNINGS if w in output], output[-6000:]
    [built] = (work / "dist").glob("llmwiki_toolchain-*.whl")
    return built


def test_the_wheel_ships_the_packages_and_the_settings_page_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in ("serve/cli.py", "serve/inspect.py", "bridge/cli.py", "common/schemas.py",
                    "bridge/static/settings.html", "bridge/static/settings.css", "bridge/static/settings.js"):
        assert shipped in names, shipped
    assert not [n for n in names if n.startswith(("tests/", "fixtures/", "scripts/", "deploy/"))]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "llmwiki-serve = serve.cli:main" in text and "llmwiki-agent-bridge = bridge.cli:main" in text


def _both_scripts_work(bin_dir: Path, work: Path) -> None:
    """serve answers a question, the bridge serves its settings page and cites serve, each started
    from `bin_dir` in a directory of its own (nothing of the checkout on their path)."""
    serve_script, bridge_script = bin_dir / "llmwiki-serve", bin_dir / "llmwiki-agent-bridge"
    version = run_command(work / "version", [serve_script, "--version"])
    assert version.returncode == 0 and version.stdout.strip(), version.stderr
    inspected = run_command(work / "inspect", [serve_script, "inspect", SAMPLE_WIKI, "--json"])
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["pages"] == 14
    serve = start_serve(work / "serve", SAMPLE_WIKI, script=serve_script, name="wheel-serve")
    try:
        argv = [bridge_script, "serve", "--host", "127.0.0.1", "--port", "0",
                "--config", work / "bridge.json"]
        process, stdout, stderr, guard = launch("wheel-bridge", argv, work / "bridge")
        bridge = Service("wheel-bridge", str(wait_ready_line("wheel-bridge", process, stdout, stderr)["url"]),
                         process, stdout, stderr, guard)
        try:
            with urllib.request.urlopen(f"{bridge.url}/settings", timeout=10) as page:
                html = page.read().decode()
            assert "LLMWiki Agent Bridge Settings" in html and "<script>" in html and "<style>" in html
            source = {"id": "wiki", "name": "Wiki", "protocol": "llmwiki-http", "status": "ready",
                      "url": serve.url}
            body = json.dumps({"data": {"query": "How do I roll back a release?",
                                        "orchestrationMode": "evidence-only",
                                        "knowledgeSources": [source]}}).encode()
            request = urllib.request.Request(f"{bridge.url}/message:send", body,
                                             {"content-type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as answer:
                text = answer.read().decode()
            assert "runbooks/rollback" in text
        finally:
            stop_checked(bridge)
    finally:
        stop_checked(serve)
    # What ran was the installed copy, not the checkout.
    cmdline = Path(serve_script).read_text(errors="replace").splitlines()[0]
    assert str(REPO) not in cmdline


def test_pip_installs_it_into_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv])
    _run([venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", wheel],
         cwd=tmp_path)
    _both_scripts_work(venv / "bin", tmp_path)


def _pip_sources() -> list[str]:
    """This machine's pip configuration (its indexes, find-links and constraints) as uv options:
    uv reads no pip.conf, and a tool install must see what pip sees."""
    listed = _run([sys.executable, "-m", "pip", "config", "list"]).stdout
    options: list[str] = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        for item in value.strip("'\"").split():
            if key.endswith(".extra-index-url"):
                options += ["--extra-index-url", item]
            elif key.endswith(".find-links"):
                options += ["--find-links", item]
            elif key.endswith(".constraint") and Path(item).exists():
                options += ["--constraints", item]
    if os.environ.get("PIP_FIND_LINKS"):
        options += ["--find-links", os.environ["PIP_FIND_LINKS"]]
    pairs = list(dict.fromkeys(zip(options[::2], options[1::2], strict=True)))
    # pip takes the best version across all its indexes; uv, by default, the first index's only.
    return [*(word for pair in pairs for word in pair), "--index-strategy", "unsafe-best-match"]


def _tool_from_pypi(name: str) -> Path:
    """A tool from PyPI, installed once into ~/.cache/llmwiki-tests/<name> (outside the tree)."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = home / "llmwiki-tests" / name
    binary = venv / "bin" / name
    if not binary.exists():
        _run([sys.executable, "-m", "venv", "--clear", venv])
        _run([venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", name])
    return binary


@pytest.fixture(scope="module")
def uv() -> Path:
    return _tool_from_pypi("uv")


def test_pipx_installs_it_as_a_tool(wheel: Path, tmp_path: Path) -> None:
    pipx = _tool_from_pypi("pipx")
    env = {**os.environ, "PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "bin"),
           "PIPX_MAN_DIR": str(tmp_path / "man")}
    _run([pipx, "install", "--python", sys.executable, wheel], env=env, cwd=tmp_path)
    _both_scripts_work(tmp_path / "bin", tmp_path)


def test_uv_installs_it_as_a_tool(wheel: Path, uv: Path, tmp_path: Path) -> None:
    env = {**os.environ, "UV_TOOL_DIR": str(tmp_path / "tools"), "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
           "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}
    _run([uv, "tool", "install", "--python", sys.executable, *_pip_sources(), wheel], env=env, cwd=tmp_path)
    _both_scripts_work(tmp_path / "bin", tmp_path)
