"""What the installed `llmwiki-serve` calls a page, per shape (titles, aliases, property links),
and the names `/read` and MCP `llmwiki_read` accept: over HTTP, on folders written here."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.hostile import call, post_json
from tests.e2e.processes import Service, start_serve, stop_checked

OBSIDIAN = {
    ".obsidian/app.json": "{}\n",
    "Callouts.md": "## Change the title\n\nA callout's title is its first line.\n",
    "Places.md": "A list of places; each names this page in its `categories`.\n",
    "Places/Tokyo.md": ('---\ncategories:\n  - "[[Places]]"\naliases: 東京\n---\n'
                        "# Neighbourhoods of the city\n\nKiyosumi for coffee.\n"),
    "Cafe.md": '---\ncategories: "[[Places]]"\naliases: [Coffee Shop]\n---\nNear [[東京]].\n',
    "Plans.md": "---\ndraft: true\naliases: Secret Trip\n---\n# Plans\n\nNot yet.\n",
}
LOGSEQ = {
    "logseq/config.edn": "{}\n",
    "pages/What is DXF%3F.md": "- DXF is a drawing exchange format.\n- ## See also\n",
    "pages/config files.md": "alias:: config file\n\n- Where settings live.\n",
    "pages/Fonts.md": "- Fonts are listed in the [[config file]].\n",
    "journals/2026_01_02.md": "- Read [[What is DXF?]]\n",
}


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def obsidian(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    work = tmp_path_factory.mktemp("obsidian")
    service = start_serve(work / "run", write(work / "vault", OBSIDIAN))
    yield service
    stop_checked(service)


@pytest.fixture(scope="module")
def logseq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    work = tmp_path_factory.mktemp("logseq")
    service = start_serve(work / "run", write(work / "graph", LOGSEQ))
    yield service
    stop_checked(service)


def read(service: Service, key: str) -> tuple[int, Any]:
    answer = call(service.url, "GET", "/read/" + urllib.parse.quote(key, safe="/"))
    return answer.status, answer.json()


def mcp_read(service: Service, key: str) -> dict[str, Any]:
    answer = post_json(service.url, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                             "params": {"name": "llmwiki_read",
                                                        "arguments": {"page_id": key}}})
    assert answer.status == 200, answer.body[:300]
    result: dict[str, Any] = answer.json()["result"]  # /mcp answers the tool's payload as is
    return result


def out_links(service: Service, seed: str, direction: str = "out") -> set[str]:
    answer = call(service.url, "GET", "/graph/neighborhood?" + urllib.parse.urlencode(
        {"seed": seed, "depth": 1, "direction": direction}))
    assert answer.status == 200, answer.body[:300]
    return {(e["source"] if direction == "in" else e["target"]) for e in answer.json()["edges"]
            if e["relation"] == "links_to"}


def test_obsidian_titles_are_file_names(obsidian: Service) -> None:
    assert read(obsidian, "Callouts")[1]["title"] == "Callouts"  # not its '## Change the title'
    assert read(obsidian, "Places/Tokyo")[1]["title"] == "Tokyo"  # not its '# Neighbourhoods'


@pytest.mark.parametrize(("key", "page_id"), [
    ("Places/Tokyo.md", "Places/Tokyo"), ("Tokyo", "Places/Tokyo"), ("東京", "Places/Tokyo"),
    ("Coffee Shop", "Cafe"), ("cafe.md", "Cafe"),
])
def test_read_by_path_title_and_alias_over_http_and_mcp(obsidian: Service, key: str,
                                                        page_id: str) -> None:
    status, page = read(obsidian, key)
    assert status == 200 and page["id"] == page_id, (status, page)
    assert mcp_read(obsidian, key)["id"] == page_id


def test_unknown_names_and_a_drafts_alias_are_not_found(obsidian: Service) -> None:
    for key in ("Nowhere", "Secret Trip", "Neighbourhoods of the city"):
        status, body = read(obsidian, key)
        assert status == 404 and body == {"detail": "page not found"}, (key, status, body)
        assert mcp_read(obsidian, key) == {"found": False}
    status, body = read(obsidian, "Plans")  # its exact id: withheld, as before
    assert status == 200 and body["found"] is False and "text" not in body


def test_aliases_and_property_links_are_graph_edges(obsidian: Service) -> None:
    assert out_links(obsidian, "Cafe") == {"page:Places", "page:Places/Tokyo"}  # [[東京]]
    assert out_links(obsidian, "Places", "in") == {"page:Cafe", "page:Places/Tokyo"}


def test_logseq_titles_aliases_and_reads(logseq: Service) -> None:
    status, page = read(logseq, "What is DXF?")
    assert status == 200 and page["id"] == "pages/What is DXF%3F", (status, page)
    assert page["title"] == "What is DXF?"
    assert read(logseq, "config files.md")[1]["id"] == "pages/config files"  # pages/ optional
    assert mcp_read(logseq, "config file")["id"] == "pages/config files"  # alias::
    assert out_links(logseq, "pages/Fonts") == {"page:pages/config files"}
    assert out_links(logseq, "journals/2026_01_02") == {"page:pages/What is DXF%3F"}


def test_notes_deleted_into_the_trash_or_kept_as_old_versions_are_not_served(tmp_path: Path) -> None:
    """Obsidian's "move to Obsidian trash" puts a deleted note in .trash; Syncthing keeps old
    versions in .stversions. Neither is a note the user sees: not counted, read, searched or
    linked, also when a note is moved to the trash while the service runs."""
    live = "---\ntitle: Rollback\n---\n# Rollback\n\nCurrent wombat steps.\n"
    root = write(tmp_path / "vault", {
        ".obsidian/app.json": "{}\n",
        "Rollback.md": live,
        "Home.md": "# Home\n\nSee [[Rollback]] and [[Retired]].\n",
        "Retired.md": "# Retired\n\nThe quokka procedure.\n",
        ".raw/source-notes.md": "# Source notes\n\nKept by the wiki compiler.\n",
        ".trash/Gone.md": "# Gone\n\nA deleted platypus note.\n",
        ".stversions/Rollback~20261201-101010.md": live.replace("Current wombat", "Old numbat"),
    })
    service = start_serve(tmp_path / "run", root)
    try:
        health = call(service.url, "GET", "/health").json()
        assert health["source"]["page_count"] == 4  # Home, Retired, Rollback and .raw's note
        assert read(service, ".raw/source-notes")[0] == 200
        for key in ("Gone", ".trash/Gone", ".stversions/Rollback~20261201-101010"):
            assert read(service, key)[0] == 404, key
        for word in ("platypus", "numbat"):
            found = post_json(service.url, "/search", {"query": word}).json()["results"]
            assert found == [], (word, found)
        assert [r["path"] for r in post_json(service.url, "/search", {"query": "wombat"}).json()[
            "results"]] == ["Rollback.md"]
        (root / "Retired.md").rename(root / ".trash" / "Retired.md")  # what Obsidian does
        assert call(service.url, "GET", "/health").json()["source"]["page_count"] == 3
        assert post_json(service.url, "/search", {"query": "quokka"}).json()["results"] == []
        assert read(service, "Retired")[0] == 404
        assert out_links(service, "Home") == {"page:Rollback", "placeholder:Retired"}
    finally:
        stop_checked(service)
