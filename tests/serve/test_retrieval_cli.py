"""CLI one-shots `llmwiki-serve query` / `search` (contract 8.1), run as real subprocesses:
JSON on stdout identical to the HTTP answer for the same arguments, clean failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from common.schemas import ContextPack, SearchResponse
from tests.support.folders import copy_fixture, tree_digest

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]  # the `serve_client` fixture

REPO = Path(__file__).resolve().parents[2]
PACK_KEYS = ["query", "wiki_title", "description", "adapter", "implementation", "page_count",
             "approved_page_count", "answerable", "orientation", "evidence", "limitations",
             "graph", "retrieval_guidance"]


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """The caller's environment without any LLMWIKI_* setting and with private caches."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMWIKI_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    env["LLMWIKI_SERVE_CACHE_DIR"] = str(tmp_path / "cli-cache")
    return env


@pytest.fixture
def korean_root(tmp_path: Path) -> Path:
    return copy_fixture("shapes/korean-wiki", tmp_path / "roots")


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "serve.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=120,
                          check=False)


def cli_json(env: dict[str, str], *args: str) -> Any:
    result = run_cli(env, *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    payload = json.loads(result.stdout)
    # indent 2, non-ASCII kept, one trailing newline
    assert result.stdout == json.dumps(payload, ensure_ascii=False, indent=2) + "\n"
    return payload


def assert_clean_failure(result: subprocess.CompletedProcess[str], code: int | None) -> None:
    if code is None:
        assert result.returncode != 0
    else:
        assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr


async def http_json(client: Client, path: str, body: dict[str, Any]) -> Any:
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    return await response.json()


# (CLI arguments after ROOT TEXT, equivalent HTTP body without the query)
EQUIVALENT_ARGS: list[Any] = [
    pytest.param([], {}, id="defaults"),
    pytest.param(["--limit", "3"], {"limit": 3}, id="limit"),
    pytest.param(["-l", "30"], {"limit": 30}, id="short-limit"),
    pytest.param(["--mode", "literal"], {"mode": "literal"}, id="literal"),
    pytest.param(["--fields", "page_id,title,route", "--snippet-chars", "0"],
                 {"fields": "page_id,title,route", "snippet_chars": 0}, id="fields-comma"),
    pytest.param(["--fields", "score", "--fields", "path,snippet"],
                 {"fields": ["score", "path", "snippet"]}, id="fields-repeated"),
    pytest.param(["--snippet-chars", "40"], {"snippet_chars": 40}, id="snippet-chars"),
    pytest.param(["--min-score", "0.9"], {"min_score": 0.9}, id="min-score"),
    pytest.param(["--exclude-page-id", "hot", "--exclude-page-id", "index.md,runbooks/rollback"],
                 {"exclude_page_ids": ["hot", "index.md", "runbooks/rollback"]},
                 id="exclusions"),
]


@pytest.mark.parametrize("command", ["query", "search"])
@pytest.mark.parametrize("text", ["release", "", "BLUEHERON"])
@pytest.mark.parametrize(("args", "body"), EQUIVALENT_ARGS)
async def test_cli_json_equals_http(serve_client: ClientFactory, sample_root: Path,
                                    cli_env: dict[str, str], command: str, text: str,
                                    args: list[str], body: dict[str, Any]) -> None:
    printed = cli_json(cli_env, command, str(sample_root), text, *args)
    client = await serve_client(sample_root)
    answered = await http_json(client, f"/{command}", {"query": text, **body})
    assert printed == answered
    if command == "query":
        assert list(printed) == PACK_KEYS
        ContextPack.model_validate(printed)
        assert printed["answerable"] is (text == "release")
    else:
        SearchResponse.model_validate(printed)
        assert list(printed) == ["results"]
        assert (printed["results"] == []) is (text == "BLUEHERON")
    assert str(sample_root) not in json.dumps(printed)


async def test_cli_korean_literal_equals_http(serve_client: ClientFactory, korean_root: Path,
                                              cli_env: dict[str, str]) -> None:
    result = run_cli(cli_env, "search", str(korean_root), "3차 계약", "--mode", "literal")
    assert result.returncode == 0, result.stderr
    assert "계약-관리" in result.stdout  # non-ASCII kept, not \\u-escaped
    printed = json.loads(result.stdout)
    assert [item["page_id"] for item in printed["results"]] == ["계약-관리"]
    assert printed["results"][0]["route"] == "literal"
    assert "3차 계약" in printed["results"][0]["snippet"]
    client = await serve_client(korean_root)
    assert printed == await http_json(client, "/search", {"query": "3차 계약", "mode": "literal"})
    pack = cli_json(cli_env, "query", str(korean_root), "3차 계약", "--mode", "literal")
    assert pack == await http_json(client, "/query", {"query": "3차 계약", "mode": "literal"})
    assert pack["wiki_title"] == "제품 운영 위키"


def test_cli_search_projects_exactly_the_requested_fields(sample_root: Path,
                                                          cli_env: dict[str, str]) -> None:
    printed = cli_json(cli_env, "search", str(sample_root), "publish.yml", "--mode", "literal",
                       "--fields", "page_id,title,route", "--snippet-chars", "0")
    results = printed["results"]
    assert {item["page_id"] for item in results} == {
        "hot", "packaging-pipeline", "release-checklist", "ko/release-checklist-ko"}
    for item in results:
        assert list(item) == ["page_id", "title", "route"]
        assert item["route"] == "literal"


def test_cli_query_empty_text_is_not_answerable(sample_root: Path,
                                                cli_env: dict[str, str]) -> None:
    pack = cli_json(cli_env, "query", str(sample_root), "   ")
    assert pack["answerable"] is False
    assert pack["evidence"] == []
    assert pack["limitations"] == ["The query is empty, so no evidence was searched.",
                                   "2 draft or unapproved page(s) were withheld."]
    assert [item["page_id"] for item in pack["orientation"]] == ["hot", "index", "overview"]


def test_cli_is_approved_only_and_writes_nothing(sample_root: Path,
                                                 cli_env: dict[str, str]) -> None:
    before = tree_digest(sample_root)
    for needle in ("BLUEHERON", "KESTRELVENDOR"):
        for mode in ("lexical", "literal"):
            printed = cli_json(cli_env, "search", str(sample_root), needle, "--mode", mode)
            assert printed == {"results": []}
            pack = cli_json(cli_env, "query", str(sample_root), needle, "--mode", mode)
            assert (pack["evidence"], pack["answerable"]) == ([], False)
            assert "runbooks/incident-comms" not in json.dumps(pack)
            assert "vendor-contacts" not in json.dumps(pack)
    assert tree_digest(sample_root) == before


@pytest.mark.parametrize("command", ["query", "search"])
@pytest.mark.parametrize("args", [
    pytest.param(["--limit", "0"], id="limit-0"),
    pytest.param(["--limit", "31"], id="limit-31"),
    pytest.param(["-l", "many"], id="limit-many"),
    pytest.param(["--snippet-chars", "-1"], id="snippet-negative"),
    pytest.param(["--snippet-chars", "2001"], id="snippet-2001"),
    pytest.param(["--min-score", "-0.5"], id="min-score-negative"),
    pytest.param(["--mode", "fuzzy"], id="mode-fuzzy"),
])
def test_cli_out_of_range_options_fail_cleanly(sample_root: Path, cli_env: dict[str, str],
                                               command: str, args: list[str]) -> None:
    result = run_cli(cli_env, command, str(sample_root), "release", *args)
    assert_clean_failure(result, 2)
    assert "usage:" in result.stderr
    assert args[0] in result.stderr  # names the offending option


@pytest.mark.parametrize("command", ["query", "search"])
@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_cli_vector_modes_are_not_enabled(sample_root: Path, cli_env: dict[str, str],
                                          command: str, mode: str) -> None:
    result = run_cli(cli_env, command, str(sample_root), "release", "--mode", mode)
    assert_clean_failure(result, 1)
    assert result.stderr.startswith("Error: Vector search is not enabled")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("command", ["query", "search"])
def test_cli_min_score_with_vector_mode(sample_root: Path, cli_env: dict[str, str],
                                        command: str) -> None:
    result = run_cli(cli_env, command, str(sample_root), "release", "--mode", "vector",
                     "--min-score", "0.5")
    assert_clean_failure(result, 1)
    assert result.stderr == ("Error: min_score is not supported for vector or hybrid search. "
                             "Remove min_score or use lexical/literal mode.\n")


@pytest.mark.parametrize("command", ["query", "search"])
def test_cli_missing_root_fails_cleanly(tmp_path: Path, cli_env: dict[str, str],
                                        command: str) -> None:
    result = run_cli(cli_env, command, str(tmp_path / "nope"), "release")
    assert_clean_failure(result, 2)
    assert "ROOT" in result.stderr


@pytest.mark.parametrize("command", ["query", "search"])
def test_cli_unsupported_root_is_error_exit_1(tmp_path: Path, cli_env: dict[str, str],
                                              command: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli(cli_env, command, str(empty), "release")
    assert_clean_failure(result, 1)
    assert result.stderr.startswith(
        "Error: No supported wiki files were found under the configured root.")
