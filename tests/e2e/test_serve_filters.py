"""Filters and query syntax (issue 27) as deployed: the installed `llmwiki-serve` over HTTP
(/search, /query), its MCP tools through the official `mcp` client on /mcp/stream, and a bad
filter refused with a clear 400, on a folder written here."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from mcp.client import Client

from tests.e2e.hostile import SAMPLE_WIKI, assert_clean_error, post_json
from tests.e2e.processes import Service, start_serve, stop_checked

RUNBOOKS = {"runbooks/hotfix-release", "runbooks/rollback", "runbooks/token-rotation"}
JOURNAL = "# Release day\n\nWe cut the release and yanked nothing.\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    work = tmp_path_factory.mktemp("filters")
    root = work / "wiki"
    shutil.copytree(SAMPLE_WIKI, root)
    journal = root / "journal" / "2026-07-11.md"  # a date-named file: a journal, dated by its name
    journal.parent.mkdir()
    journal.write_text(JOURNAL, encoding="utf-8")
    os.utime(journal, (1_000_000_000, 1_000_000_000))  # its file time must not be what dates it
    service = start_serve(work / "run", root)
    yield service
    stop_checked(service)


def ids(items: list[dict[str, object]]) -> list[str]:
    return [str(item["page_id"]) for item in items]


def test_search_takes_filters_before_the_limit(served: Service) -> None:
    plain = post_json(served.url, "/search", {"query": "release version", "limit": 1})
    assert plain.status == 200 and ids(plain.json()["results"])[0] not in RUNBOOKS
    answer = post_json(served.url, "/search", {"query": "release version", "limit": 1,
                                               "filters": {"tags_any": ["#Runbook"]}})
    assert answer.status == 200, answer.body[:300]
    [first] = ids(answer.json()["results"])
    assert first in RUNBOOKS


def test_query_lists_what_filters_alone_admit(served: Service) -> None:
    answer = post_json(served.url, "/query", {"query": "", "limit": 30,
                                              "filters": {"path_prefix": ["runbooks/"]}})
    assert answer.status == 200, answer.body[:300]
    pack = answer.json()
    assert set(ids(pack["evidence"])) == RUNBOOKS and pack["answerable"] is True
    journals = post_json(served.url, "/search", {"query": "release", "filters": {
        "kinds": ["journal"], "date_from": "2026-07-11", "date_to": "2026-07-11"}})
    assert ids(journals.json()["results"]) == ["journal/2026-07-11"]
    nothing = post_json(served.url, "/query", {"query": "roll back", "filters": {"tags_all": ["none-such"]}})
    pack = nothing.json()
    assert pack["evidence"] == [] and pack["answerable"] is False
    assert any("filters admit no page" in line for line in pack["limitations"])


def test_phrases_and_minus_words_narrow_a_search(served: Service) -> None:
    phrase = post_json(served.url, "/search", {"query": 'release "previous version"'})
    assert ids(phrase.json()["results"]) == ["runbooks/rollback"]
    minus = post_json(served.url, "/search", {"query": "release -yanked", "limit": 30})
    assert minus.status == 200 and "runbooks/rollback" not in ids(minus.json()["results"])
    assert "journal/2026-07-11" not in ids(minus.json()["results"])


@pytest.mark.parametrize("route", ["/search", "/query"])
def test_an_unknown_filter_is_a_clear_400(served: Service, route: str) -> None:
    answer = post_json(served.url, route, {"query": "release", "filters": {"tag": ["runbook"]}})
    assert answer.status == 400
    assert_clean_error(answer, str(SAMPLE_WIKI.parent))
    assert answer.json() == {"detail": "filters has an unknown key 'tag': expected tags_any, tags_all, "
                                       "path_prefix, kinds, date_from, date_to."}
    bad_date = post_json(served.url, route, {"query": "x", "filters": {"date_to": "2026-02-30"}})
    assert bad_date.status == 400 and "filters.date_to must be a date" in bad_date.json()["detail"]


async def test_the_official_mcp_client_filters_through_the_search_tools(served: Service) -> None:
    async with Client(f"{served.url}/mcp/stream") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        schema = tools["llmwiki_search"].input_schema["properties"]["filters"]
        assert "tags_any" in schema["anyOf"][0]["properties"]
        found = await client.call_tool("llmwiki_search", {"query": "release", "limit": 30,
                                                          "filters": {"tags_any": ["runbook"]}})
        assert found.is_error is False and found.structured_content is not None
        results = ids(found.structured_content["results"])
        assert results and set(results) <= RUNBOOKS
        pack = await client.call_tool("llmwiki_context", {"query": "", "filters": {"kinds": ["orientation"]}})
        assert pack.structured_content is not None
        assert set(ids(pack.structured_content["evidence"])) <= {"hot", "index", "overview"}
        refused = await client.call_tool("llmwiki_search", {"query": "x", "filters": {"kinds": ["diary"]}})
        assert refused.is_error is True
        assert "filters.kinds has an unknown kind 'diary'" in refused.content[0].text  # type: ignore[union-attr]
