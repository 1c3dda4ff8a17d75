"""The installed bridge passes `retrieval.search.filters` to the installed serve it fans out to
over HTTP (issue 27): with the filter every citation is a page it admits; without, not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.processes import Service, start_bridge, stop_checked

RUNBOOKS = {"runbooks/hotfix-release", "runbooks/rollback", "runbooks/token-rotation"}
QUESTION = "release version signing"


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory, our_serve: Service) -> Iterator[Service]:
    settings = {"sources": [{"id": "wiki", "name": "Wiki", "protocol": "llmwiki-http",
                             "url": our_serve.url}]}
    service = start_bridge(tmp_path_factory.mktemp("filters-bridge"), settings=settings)
    yield service
    stop_checked(service)


def cited(bridge: Service, **retrieval: Any) -> list[str]:
    data: dict[str, Any] = {"query": QUESTION, "orchestrationMode": "evidence-only"}
    if retrieval:
        data["retrieval"] = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical", **retrieval}
    response = httpx.post(f"{bridge.url}/message:send", json={"data": data}, timeout=60)
    assert response.status_code == 200, response.text
    result = response.json()["artifacts"][0]["parts"][0]["data"]
    assert result["diagnostics"] == [], result["diagnostics"]  # serve advertises filters
    return [c["pageId"] for c in result["citations"] if c["sourceId"] == "wiki"]


def test_a_filter_reaches_the_http_source(bridge: Service) -> None:
    unfiltered = cited(bridge)
    assert set(unfiltered) - RUNBOOKS  # the question alone cites other pages too
    filtered = cited(bridge, search={"filters": {"tagsAny": ["runbook"]}})
    assert filtered and set(filtered) <= RUNBOOKS
    refused = httpx.post(f"{bridge.url}/message:send", timeout=60, json={"data": {
        "query": QUESTION, "orchestrationMode": "evidence-only", "retrieval": {
            "schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical",
            "search": {"filters": {"tags_any": ["runbook"]}}}}})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_retrieval_intent"
