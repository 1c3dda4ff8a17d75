"""The llmwiki-agent-bridge command: version, start-up refusals, and a real serve process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from bridge.cli import main
from common.version import __version__

REPO = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("LLMWIKI_", "HERMES_")) and k not in ("HOST", "PORT")}
    return {**keep, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PYTHONPATH": str(REPO), **extra}


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"{__version__}\n"


def test_public_bind_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in _env(tmp_path).items():
        monkeypatch.setenv(key, value)
    assert main(["--host", "0.0.0.0", "--port", "0"]) == 1
    assert "LLMWIKI_AGENT_BRIDGE_ALLOW_PUBLIC_BIND=1" in capsys.readouterr().err
    assert main(["--host", "0.0.0.0", "--allow-public-bind"]) == 1
    assert "LLMWIKI_AGENT_BRIDGE_BEARER_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("LLMWIKI_AGENT_BRIDGE_SOURCE_POLICY", "nope")
    assert main([]) == 1
    assert "source policy: nope" in capsys.readouterr().err


async def test_serve_prints_ready_and_answers(tmp_path: Path) -> None:
    config = tmp_path / "bridge.json"
    config.write_text(json.dumps({"config": {"model": "saved-model"}, "sources": []}), encoding="utf-8")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "serve", "--port", "0", "--config", str(config),
        "--bearer-token", "cli-secret", "--log-format", "json",
        env=_env(tmp_path, LLMWIKI_AGENT_BRIDGE_BASE_URL="http://user:pw@127.0.0.1:1/v1?k=secret"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        ready = json.loads(line)
        assert ready["event"] == "ready" and ready["url"].startswith("http://127.0.0.1:")
        assert ready["baseUrl"] == "http://127.0.0.1:1/v1" and ready["baseUrlSource"] == "env"
        assert ready["modelSource"] == "settings" and ready["bridgeAuthConfigured"] is True
        assert ready["settingsPersistence"] is True and ready["sourcePolicy"] == "private-http"
        assert "cli-secret" not in line.decode()
        async with aiohttp.ClientSession() as session:
            async with session.get(ready["url"] + "/health") as response:
                assert response.status == 401
            async with session.get(ready["url"] + "/settings.json",
                                   headers={"Authorization": "Bearer cli-secret"}) as response:
                body = await response.json()
                assert body["persistence"]["enabled"] is True
                assert body["runtimeConnection"]["baseUrl"] == "http://127.0.0.1:1/v1"
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _registry_file(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "registry.json"
    path.write_text(json.dumps({"version": 1, "config": {"model": "m", "baseUrl": "http://127.0.0.1:1/v1"},
                                "sources": [{"id": "wiki", "url": url, "root": "/abs/notes/wiki"},
                                            {"id": "off", "url": url, "selected": False}]}),
                    encoding="utf-8")
    return path


def test_sources_and_status_json_are_offline_operator_views(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = _registry_file(tmp_path, "http://127.0.0.1:9/?k=v")
    assert main(["sources", "--json", "--config", str(path)]) == 0
    view = json.loads(capsys.readouterr().out)
    wiki = view["sources"][0]
    assert wiki["url"] == "http://127.0.0.1:9/?k=v"  # local output keeps the raw URL and root
    assert wiki["root"] == "/abs/notes/wiki" and wiki["rootRedacted"] is False
    assert view["registeredCount"] == 2 and view["readyCount"] == 1
    assert main(["status", "--json", f"--config={path}"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["runtimeConnection"]["modelSource"] == "settings"
    assert status["runtimeConnection"]["baseUrlSource"] == "settings"
    assert status["persistence"]["enabled"] is True
    assert status["sourceRegistry"]["selectedCount"] == 1


async def test_sources_probe_text(tmp_path: Path, serve_url: str) -> None:
    path = _registry_file(tmp_path, serve_url)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "ls", "--probe", "--config", str(path), env=_env(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0
    lines = out.decode().splitlines()
    assert lines[0] == "Sources: 2 registered, 1 selected, 1 ready (live_probe)"
    assert lines[1].split() == ["ID", "URL", "ROOT", "PROTOCOL", "HEALTH", "SELECTED", "PAGES"]
    assert lines[2].split() == ["wiki", serve_url, "/abs/notes/wiki", "llmwiki-http", "ok", "yes", "14"]
    assert lines[3].split()[-2:] == ["not_selected", "no"]


def test_sources_with_a_corrupt_file_fail_cleanly(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{", encoding="utf-8")
    assert main(["status", "--config", str(path)]) == 0
    assert "Sources: 0 registered" in capsys.readouterr().out


def test_status_probe_checks_the_runtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _registry_file(tmp_path, "http://127.0.0.1:9/")  # its runtime: port 1, nothing there
    assert main(["status", "--json", "--config", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["runtimeConnection"]["reachability"]["checked"] is False
    assert main(["status", "--probe", "--json", "--config", str(path)]) == 0
    reachability = json.loads(capsys.readouterr().out)["runtimeConnection"]["reachability"]
    assert reachability["checked"] is True and reachability["reachable"] is False
    assert main(["status", "--probe", "--config", str(path)]) == 0
    assert "Runtime probe: unreachable (request_failed)" in capsys.readouterr().out.splitlines()
