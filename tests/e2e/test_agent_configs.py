"""docs/agents.md's stdio configurations, launched exactly as written (the command, arguments and
environment each block gives, from another working directory) and driven by two MCP clients
nobody here wrote: the official Python client and the MCP Inspector's CLI, which the test installs
from npm into a cache folder outside the tree. A block that stops working fails here."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client

from tests.e2e.conftest import REPO, SAMPLE_WIKI
from tests.e2e.processes import console_script, service_env

DOC = REPO / "docs" / "agents.md"
FOLDER = "/home/me/notes"  # the placeholder every block uses for the user's folder
BLOCK_RE = re.compile(r"<!-- e2e: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", re.DOTALL)
DOCUMENTED = {"claude-code", "claude-desktop", "codex", "cursor", "vscode", "inspector"}
INSPECTOR = "@modelcontextprotocol/inspector"
INSPECTOR_VERSION = "0.21.2"  # the last line whose --cli runs on Debian's Node 20
TOOLS = {"llmwiki_context", "llmwiki_search", "llmwiki_read", "llmwiki_graph", "llmwiki_graph_neighbors",
         "llmwiki_source_refs", "llmwiki_source_bundle"}


@dataclass(frozen=True)
class Launch:
    """What a client starts: the command, its arguments and the environment it adds."""

    command: str
    args: list[str]
    env: dict[str, str]


def _blocks() -> dict[str, tuple[str, str]]:
    return {name: (language, body) for name, language, body in BLOCK_RE.findall(DOC.read_text("utf-8"))}


def _options(words: list[str], names: tuple[str, ...]) -> dict[str, str]:
    """KEY=VALUE pairs given as `--env K=V` or `-e K=V`."""
    pairs = [words[i + 1] for i, word in enumerate(words[:-1]) if word in names]
    return dict(pair.split("=", 1) for pair in pairs)


def launch_of(name: str, language: str, body: str) -> Launch:
    if language == "json":
        document = json.loads(body)
        entry = (document.get("mcpServers") or document["servers"])["notes"]
        assert entry.get("type", "stdio") == "stdio", name
        return Launch(entry["command"], list(entry["args"]), dict(entry.get("env", {})))
    if language == "toml":
        entry = tomllib.loads(body)["mcp_servers"]["notes"]
        return Launch(entry["command"], list(entry["args"]), dict(entry.get("env", {})))
    words = shlex.split(body)
    if words[:3] == ["claude", "mcp", "add"]:
        split = words.index("--")
        assert words[split - 1] == "notes" and "stdio" in words[:split], body
        return Launch(words[split + 1], words[split + 2:], _options(words[:split], ("--env", "-e")))
    assert words[:3] == ["npx", INSPECTOR, "--cli"], body
    rest = words[3:words.index("--method")]
    while rest[0] == "-e":
        rest = rest[2:]
    return Launch(rest[0], rest[1:], _options(words, ("-e",)))


def _placed(args: list[str], folder: Path) -> list[str]:
    return [arg.replace(FOLDER, str(folder)) for arg in args]


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory that is neither the checkout nor the folder, as a client's is."""
    return tmp_path_factory.mktemp("client-cwd")


@pytest.fixture(scope="module")
def client_env(elsewhere: Path) -> dict[str, str]:
    """What a desktop client hands its servers: its own environment (HOME, PATH with the installed
    command on it); the network guard rides along on PYTHONPATH."""
    env = service_env(elsewhere)
    env["PATH"] = f"{console_script('llmwiki-serve').parent}{os.pathsep}{env.get('PATH', '')}"
    env["E2E_GUARD_LOG"] = str(elsewhere / "guard.log")
    return env


@pytest.fixture(scope="module")
def inspector() -> Path:
    """The MCP Inspector from npm, installed once into ~/.cache/llmwiki-tests (outside the tree)."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    prefix = home / "llmwiki-tests" / f"mcp-inspector-{INSPECTOR_VERSION}"
    binary = prefix / "node_modules" / ".bin" / "mcp-inspector"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:  # ./scripts/bootstrap test installs Debian's nodejs and npm
        pytest.fail("npm is not installed: run ./scripts/bootstrap test")
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                           "--loglevel=error", f"{INSPECTOR}@{INSPECTOR_VERSION}"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0 and binary.exists(), done.stderr[-3000:]
    return binary


def test_every_client_named_has_a_tested_block() -> None:
    assert set(_blocks()) == DOCUMENTED


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
async def test_the_official_client_drives_the_block_as_written(name: str, elsewhere: Path,
                                                               client_env: dict[str, str]) -> None:
    launch = launch_of(name, *_blocks()[name])
    assert FOLDER in launch.args and Path(launch.command).name == "llmwiki-serve"
    params = StdioServerParameters(command=launch.command, args=_placed(launch.args, SAMPLE_WIKI),
                                   env={**client_env, **launch.env}, cwd=str(elsewhere))
    with (elsewhere / f"{name}.stderr").open("w") as errlog:  # the client's MCP log of the server
        async with Client(stdio_client(params, errlog=errlog)) as client:
            assert client.server_info is not None
            assert client.server_info.name == launch.env["LLMWIKI_MCP_SERVER_NAME"]
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
            found = await client.call_tool("llmwiki_search", {"query": "rollback", "limit": 3})
            assert found.is_error is False
            assert "runbooks/rollback" in json.dumps(found.structured_content or
                                                     [c.model_dump() for c in found.content])
            resources = (await client.list_resources()).resources
            assert len(resources) == 12  # the approved pages; drafts stay withheld
    assert not (elsewhere / "guard.log").exists(), (elsewhere / "guard.log").read_text()
    assert "Traceback" not in (elsewhere / f"{name}.stderr").read_text()


def _inspect_cli(inspector: Path, argv: list[str], env: dict[str, str], cwd: Path) -> Any:
    done = subprocess.run([str(inspector), *argv], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_the_inspector_cli_drives_the_block_as_written(name: str, elsewhere: Path, inspector: Path,
                                                       client_env: dict[str, str]) -> None:
    language, body = _blocks()[name]
    placed = body.replace(FOLDER, str(SAMPLE_WIKI))
    if name == "inspector":  # the documented command itself, npx replaced by the installed CLI
        words = shlex.split(placed)
        listed = _inspect_cli(inspector, words[2:], client_env, elsewhere)
        assert {tool["name"] for tool in listed["tools"]} == TOOLS
        return
    call = ["--method", "tools/call", "--tool-name", "llmwiki_search", "--tool-arg", "query=rollback"]
    if language == "json" and "mcpServers" in json.loads(placed):
        # The file as the client reads it: the Inspector takes the same mcpServers format.
        config = elsewhere / f"{name}.json"
        config.write_text(placed, encoding="utf-8")
        argv = ["--cli", "--config", str(config), "--server", "notes", *call]
    else:
        launch = launch_of(name, language, placed)
        env_args = [arg for key, value in launch.env.items() for arg in ("-e", f"{key}={value}")]
        argv = ["--cli", *env_args, launch.command, *launch.args, *call]
    answer = _inspect_cli(inspector, argv, client_env, elsewhere)
    assert answer.get("isError") is not True, answer
    text = "".join(part.get("text", "") for part in answer["content"])
    assert "runbooks/rollback" in text
