"""The llmwiki-serve command line, run as a real subprocess: output, exit codes, no tracebacks."""

from __future__ import annotations

import gc
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from common.schemas import CorsStatus
from common.version import __version__
from tests.support.folders import copy_fixture, tree_digest

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]  # the `serve_client` fixture

REPO = Path(__file__).resolve().parents[2]
CAPABILITIES = ["llmwiki_source_bundle", "llmwiki_context", "llmwiki_search", "llmwiki_read",
                "llmwiki_graph", "llmwiki_graph_neighbors", "llmwiki_source_refs",
                "mcp-jsonrpc", "mcp-streamable-http", "llmwiki_retrieval_v1",
                "llmwiki_agent_guided_lexical_v1",
                "llmwiki_search_mode_lexical", "llmwiki_search_mode_literal",
                "llmwiki_search_filters_v1"]


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """The caller's environment without any LLMWIKI_* setting and with private caches."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMWIKI_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    env["LLMWIKI_SERVE_CACHE_DIR"] = str(tmp_path / "cli-cache")
    return env


def run_cli(env: dict[str, str], *args: str, extra_env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "serve.cli", *args], cwd=REPO, env={**env, **(extra_env or {})},
        capture_output=True, text=True, timeout=timeout, check=False,
    )


def unused_port() -> int:
    """A loopback port nothing listens on, so a `serve` that wrongly starts cannot clash
    with a real instance on the default port (it is then killed by the timeout)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def assert_clean_failure(result: subprocess.CompletedProcess[str], code: int) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "Traceback" not in result.stdout
    assert result.stdout == ""


@pytest.mark.parametrize("flag", ["--version", "-v"])
def test_version(cli_env: dict[str, str], flag: str) -> None:
    result = run_cli(cli_env, flag)
    assert result.returncode == 0
    assert result.stdout == f"{__version__}\n"


def test_manifest_prints_resolved_root(cli_env: dict[str, str], sample_root: Path,
                                       tmp_path: Path) -> None:
    digest = tree_digest(sample_root)
    unresolved = sample_root.parent / ".." / sample_root.parent.name / sample_root.name
    result = run_cli(cli_env, "manifest", str(unresolved))
    assert result.returncode == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert manifest["root"] == str(sample_root.resolve())
    assert os.path.isabs(manifest["root"])
    assert manifest["title"] == "Sample Operations Wiki"
    assert (manifest["page_count"], manifest["approved_page_count"]) == (14, 12)
    assert manifest["capabilities"] == CAPABILITIES
    assert "a2a-message" not in manifest["capabilities"]
    assert result.stdout.startswith("{\n  \"title\": ")  # indent 2
    # one-shot commands write nothing in the root; they leave the restart cache `serve` uses,
    # in the cache directory given, and a second one starts from it
    assert tree_digest(sample_root) == digest
    assert not (tmp_path / "xdg-cache").exists()
    [cached] = os.listdir(tmp_path / "cli-cache")
    assert cached.startswith("store-")
    again = run_cli(cli_env, "manifest", str(unresolved))
    assert again.returncode == 0 and json.loads(again.stdout) == manifest
    assert os.listdir(tmp_path / "cli-cache") == [cached]


async def test_manifest_matches_http_except_root(cli_env: dict[str, str],
                                                 serve_client: ClientFactory,
                                                 sample_root: Path) -> None:
    result = run_cli(cli_env, "manifest", str(sample_root))
    assert result.returncode == 0, result.stderr
    cli = json.loads(result.stdout)
    client = await serve_client(sample_root)
    http = await (await client.get("/manifest")).json()
    assert http["root"] == ""
    assert list(cli) == list(http)
    assert {**cli, "root": ""} == http


@pytest.mark.parametrize("fixture", ["sample-wiki", "shapes/reference-sample",
                                     "shapes/korean-wiki"])
@pytest.mark.parametrize("command", ["source-refs", "source-bundle"])
async def test_cli_equals_http(cli_env: dict[str, str], serve_client: ClientFactory,
                               tmp_path: Path, fixture: str, command: str) -> None:
    root = copy_fixture(fixture, tmp_path / "roots")
    result = run_cli(cli_env, command, str(root))
    assert result.returncode == 0, result.stderr
    cli: Any = json.loads(result.stdout)
    client = await serve_client(root)
    response = await client.get(f"/{command}")
    assert response.status == 200
    http = await response.json()
    assert cli == http
    assert list(cli) == list(http)
    assert len(cli["source_refs"]) > 0


def test_korean_output_is_not_escaped(cli_env: dict[str, str], tmp_path: Path) -> None:
    root = copy_fixture("shapes/korean-wiki", tmp_path / "roots")
    result = run_cli(cli_env, "manifest", str(root))
    assert result.returncode == 0, result.stderr
    assert '"title": "제품 운영 위키"' in result.stdout


@pytest.mark.parametrize("command", ["manifest", "source-refs", "source-bundle"])
def test_missing_root_is_usage_error(cli_env: dict[str, str], tmp_path: Path,
                                     command: str) -> None:
    missing = tmp_path / "does-not-exist"
    result = run_cli(cli_env, command, str(missing))
    assert_clean_failure(result, 2)
    assert "ROOT must be an existing directory" in result.stderr
    assert str(missing) in result.stderr


def test_file_root_is_usage_error(cli_env: dict[str, str], tmp_path: Path) -> None:
    not_a_dir = tmp_path / "page.md"
    not_a_dir.write_text("# Not a folder\n", encoding="utf-8")
    result = run_cli(cli_env, "manifest", str(not_a_dir))
    assert_clean_failure(result, 2)
    assert "ROOT must be an existing directory" in result.stderr


@pytest.mark.parametrize("shape", ["dendron", "foam", "logseq", "quartz"])
@pytest.mark.parametrize("command", ["manifest", "source-refs", "source-bundle"])
def test_marker_only_root_is_error_exit_1(cli_env: dict[str, str], tmp_path: Path, shape: str,
                                          command: str) -> None:
    root = copy_fixture(f"shapes/marker-only/{shape}", tmp_path / "roots")
    result = run_cli(cli_env, command, str(root))
    assert_clean_failure(result, 1)
    assert result.stderr.startswith("Error: ")
    assert result.stderr.count("\n") == 1


def test_empty_root_is_error_exit_1(cli_env: dict[str, str], tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    result = run_cli(cli_env, "manifest", str(root))
    assert_clean_failure(result, 1)
    assert result.stderr.startswith("Error: ")


def test_unsupported_root_error_names_the_problem(cli_env: dict[str, str],
                                                  tmp_path: Path) -> None:
    root = copy_fixture("shapes/marker-only/quartz", tmp_path / "roots")
    result = run_cli(cli_env, "manifest", str(root))
    assert result.returncode == 1
    assert "No supported wiki files were found" in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--port", "0"], "port must be between 1 and 65535"),
    (["--port", "70000"], "port must be between 1 and 65535"),
    (["--port", "abc"], "argument --port: invalid"),
    (["--refresh-interval-seconds", "-1"], "refresh_interval_seconds must be >= 0"),
    (["--graph-default-limit", "0"], "graph_default_limit must be between 1 and 2000"),
    (["--graph-default-limit", "2001"], "graph_default_limit must be between 1 and 2000"),
    (["--max-body-bytes", "10"], "max_body_bytes must be between"),
    (["--log-format", "xml"], "log_format must be auto, json or console"),
])
def test_invalid_serve_options_fail_cleanly(cli_env: dict[str, str], sample_root: Path,
                                            args: list[str], message: str) -> None:
    if "--port" not in args:
        args = [*args, "--port", str(unused_port())]
    result = run_cli(cli_env, "serve", str(sample_root), *args, timeout=20)
    assert_clean_failure(result, 2)
    assert message in result.stderr
    assert result.stderr.startswith("usage: ")


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("LLMWIKI_GRAPH_DEFAULT_LIMIT", "abc", "LLMWIKI_GRAPH_DEFAULT_LIMIT must be an integer"),
    ("LLMWIKI_GRAPH_DEFAULT_LIMIT", "0", "graph_default_limit must be between 1 and 2000"),
    ("LLMWIKI_SERVE_MAX_PAGE_BYTES", "lots", "LLMWIKI_SERVE_MAX_PAGE_BYTES must be an integer"),
    ("LLMWIKI_SERVE_PORT", "99999", "port must be between 1 and 65535"),
])
def test_invalid_environment_fails_cleanly(cli_env: dict[str, str], sample_root: Path,
                                           variable: str, value: str, message: str) -> None:
    port = [] if variable == "LLMWIKI_SERVE_PORT" else ["--port", str(unused_port())]
    result = run_cli(cli_env, "serve", str(sample_root), *port, extra_env={variable: value},
                     timeout=20)
    assert_clean_failure(result, 2)
    assert message in result.stderr


def test_no_command_is_usage_error(cli_env: dict[str, str]) -> None:
    result = run_cli(cli_env)
    assert_clean_failure(result, 2)
    assert "usage: " in result.stderr


# -- start-up of `serve` -----------------------------------------------------------------


def test_gc_is_paused_during_start_up_and_resumed_after() -> None:
    from serve.cli import pause_gc_for_start_up, resume_gc_after_start_up

    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    pause_gc_for_start_up()
    try:
        assert not gc.isenabled()
    finally:
        resume_gc_after_start_up()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen
    gc.unfreeze()  # give this test process's objects back to the collector


def test_early_read_starts_only_without_a_restart_cache(sample_root: Path, tmp_path: Path) -> None:
    from serve.cli import start_early_read
    from serve.settings import ServeSettings
    from serve.store.database import store_path

    settings = ServeSettings(root=sample_root, cache_dir=tmp_path / "cache")
    early = start_early_read(settings)
    assert early is not None
    early.close()
    path = store_path(tmp_path / "cache", sample_root.resolve())
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    assert start_early_read(settings) is None
    no_cache = start_early_read(ServeSettings(root=sample_root, page_cache=False))
    assert no_cache is not None
    no_cache.close()
    inside = ServeSettings(root=sample_root, cache_dir=sample_root / "cache")
    assert start_early_read(inside) is None


def _health(port: int, deadline: float) -> dict[str, Any]:
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/health")
            response = connection.getresponse()
            body = response.read()
            if response.status == 200:
                return dict(json.loads(body))
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("serve did not answer /health in time")
        time.sleep(0.05)


def test_serve_reads_a_large_folder_ahead_and_answers_as_the_service_does(
        cli_env: dict[str, str], tmp_path: Path) -> None:
    """Big enough for the early read and the parse workers; the served answers must be
    those of a KnowledgeSource that read the folder the ordinary way."""
    from serve.service import KnowledgeSource
    from serve.settings import ServeSettings

    root = tmp_path / "large"
    for i in range(1600):
        page = root / f"topic-{i % 9}" / f"page-{i}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"---\ntitle: Page {i}\ntags: [t{i % 13}]\n---\n# Page {i}\n\n"
                        f"See [[page-{(i * 7) % 1600}]].\n\n## Part\ntext {i}\n", encoding="utf-8")
    port = unused_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "serve.cli", "serve", str(root), "--port", str(port)],
        cwd=REPO, env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        served = _health(port, time.monotonic() + 60)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0
    assert b"Traceback" not in stderr and b"early_read_failed" not in stderr
    source = KnowledgeSource(ServeSettings(root=root, page_cache=False))
    try:
        expected = source.health(CorsStatus(mode="local-dev-allowlist", local_dev_origins=True,
                                            explicit_origin_count=0)).model_dump(mode="json")
    finally:
        source.close()
    assert served["source"] == expected["source"]
    assert served["source"]["page_count"] == 1600
    assert os.listdir(tmp_path / "cli-cache")  # the first start wrote the restart cache
