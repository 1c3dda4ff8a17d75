"""Reads by what graph seeds accept, and the per-shape names they find (issue 15).

Runs on the shape fixtures (fixtures/shapes/), so it runs in CI; docs/metadata-rules.md
states the rules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from serve.service import KnowledgeSource
from serve.settings import ServeSettings

SHAPES = Path(__file__).resolve().parents[2] / "fixtures" / "shapes"


@pytest.fixture
def source(request: pytest.FixtureRequest) -> Iterator[KnowledgeSource]:
    ks = KnowledgeSource(ServeSettings(root=SHAPES / request.param, page_cache=False,
                                       inotify=False, refresh_interval_seconds=3600.0,
                                       allow_drafts=True))
    yield ks
    ks.close()


def read_id(source: KnowledgeSource, key: str, include_drafts: bool = False) -> str:
    result = source.read(key, include_drafts=include_drafts)
    return str(result.payload.get("id")) if result.outcome == "found" else result.outcome


def links_of(source: KnowledgeSource, page_id: str) -> set[str]:
    hood = source.neighborhood([page_id], depth=1, direction="out", limit=100).model_dump()
    return {e["target"] for e in hood["edges"]
            if e["source"] == f"page:{page_id}" and e["relation"] == "links_to"}


@pytest.mark.parametrize("source", ["obsidian-properties"], indirect=True)
@pytest.mark.parametrize(("key", "page_id"), [
    ("Places/Tokyo", "Places/Tokyo"),  # id
    ("Places/Tokyo.md", "Places/Tokyo"),  # path
    ("Tokyo", "Places/Tokyo"),  # title (the file name)
    ("tokyo.md", "Places/Tokyo"),  # file name, any case
    ("東京", "Places/Tokyo"),  # alias, a single string
    ("Big City", "Cities"),  # alias from a list
    ("Blue Bottle Kiyosumi", "Places/Blue Bottle Kiyosumi"),
    ("A coffee roastery by the river", "missing"),  # its heading is not its name
    ("Nowhere", "missing"),
])
def test_obsidian_reads_by_id_path_title_and_alias(source: KnowledgeSource, key: str,
                                                    page_id: str) -> None:
    assert read_id(source, key) == page_id


@pytest.mark.parametrize("source", ["obsidian-properties"], indirect=True)
def test_a_draft_stays_withheld_by_every_name(source: KnowledgeSource) -> None:
    assert read_id(source, "Trip Plan") == "withheld"  # its exact id, as before
    assert read_id(source, "Trip Plan.md") == "withheld"
    # Looser names look among visible pages only: nothing says the draft exists.
    assert read_id(source, "Secret Itinerary") == "missing"
    assert read_id(source, "trip plan") == "missing"
    # A caller allowed drafts (operator flag and request) finds it by its alias.
    assert read_id(source, "Secret Itinerary", include_drafts=True) == "Trip Plan"


@pytest.mark.parametrize("source", ["obsidian-properties"], indirect=True)
def test_obsidian_property_links_and_aliases_are_edges(source: KnowledgeSource) -> None:
    assert links_of(source, "Places/Blue Bottle Kiyosumi") == {
        "page:Places", "page:Places/Tokyo", "placeholder:Cafes"}
    assert links_of(source, "Places/Tokyo") == {"page:Places", "page:Cities"}
    hood = source.neighborhood(["Places"], depth=1, direction="in", limit=100).model_dump()
    assert {e["source"] for e in hood["edges"] if e["relation"] == "links_to"} == {
        "page:Places/Blue Bottle Kiyosumi", "page:Places/Tokyo"}
    assert source.neighborhood(["東京"], depth=0).seeds == ["page:Places/Tokyo"]


@pytest.mark.parametrize("source", ["logseq-graph"], indirect=True)
@pytest.mark.parametrize(("key", "page_id"), [
    ("pages/Project___Alpha", "pages/Project___Alpha"),
    ("Project___Alpha", "pages/Project___Alpha"),  # pages/ optional
    ("Project___Alpha.md", "pages/Project___Alpha"),
    ("Project/Alpha", "pages/Project___Alpha"),  # title
    ("Org-Page.org", "pages/Org-Page"),
    ("2026_07_01", "journals/2026_07_01"),
])
def test_logseq_reads_without_the_folder(source: KnowledgeSource, key: str, page_id: str) -> None:
    assert read_id(source, key) == page_id


@pytest.mark.parametrize("source", ["dendron-self-contained"], indirect=True)
def test_dendron_self_contained_vault_and_cross_vault_links(source: KnowledgeSource) -> None:
    assert source.manifest().model_dump()["approved_page_count"] == 3
    assert source.read("sop0timeoff0000000001").payload["title"] == "Time Off"
    assert read_id(source, "Time Off") == "sop0timeoff0000000001"
    assert read_id(source, "handbook.sop.time-off") == "sop0timeoff0000000001"
    assert links_of(source, "people0remote00000001") == {"page:sop0timeoff0000000001"}
    assert "stage.seed" in source.read("people0remote00000001").payload["tags"]


@pytest.mark.parametrize("source", ["foam-jsonc"], indirect=True)
def test_foam_jsonc_workspace_titles(source: KnowledgeSource) -> None:
    assert source.manifest().model_dump()["adapter"] == "foam"
    titles = {p.id: p.title for p in source.snapshot().approved_pages}
    assert titles == {"watering-schedule": "Watering Schedule", "readme": "Garden Notebook",
                      "guides/compost-guide": "Compost Guide", "seed-starting": "seed starting"}
