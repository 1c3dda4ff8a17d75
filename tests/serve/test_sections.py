"""Sections cite the file to the line: for every evidence item of every judged query over
every fixture shape, the file's lines line_start..line_end hold the item's passage and hash to
its sha256 (a passage the item leaves out is in its snippet); handles resolve to the same
lines; odd files (CRLF, BOM, bytes not UTF-8, headings in fences) are counted as they are on
disk."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from serve.errors import WikiRootError
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from serve.source import sections as S
from serve.source.page import ParseOptions
from serve.source.parse import parse_page
from serve.watch.file_read import read_file
from tests.support.folders import copy_fixture

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
# A marker file alone is no wiki: that shape is served by no one (test below).
UNSERVABLE = {"shapes/marker-only"}
FOLDERS = ["sample-wiki", *sorted(f"shapes/{p.name}" for p in (FIXTURES / "shapes").iterdir()
                                  if p.is_dir() and f"shapes/{p.name}" not in UNSERVABLE)]
JUDGED = [json.loads(line) for line in (FIXTURES / "judged" / "fixtures.jsonl").read_text().splitlines()
          if line.strip()]


def file_lines(root: Path, origin: dict[str, Any]) -> bytes:
    """The file's lines line_start..line_end as bytes, line breaks included."""
    data = (root / origin["path"]).read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = data.split(b"\n")
    chunk = b"\n".join(lines[origin["line_start"] - 1:origin["line_end"]])
    return chunk + b"\n" if origin["line_end"] < len(lines) else chunk


def passage_words(passage: str) -> list[str]:
    words = passage.split()
    if words and words[-1].endswith("..."):
        words[-1] = words[-1][:-3]
    return [w for w in words if w]


REFERENCE_ITEM_KEYS = ["page_id", "title", "path", "score", "snippet", "role", "source_refs", "route"]
# Every key but the snippet: the passage is then always there.
NO_SNIPPET = ("title", "path", "score", "role", "source_refs", "route", "section", "origin",
              "matched_fields", "passage")


def check_item(root: Path, item: dict[str, Any], bundle_id: str, passage: str) -> None:
    """`passage`: the item's passage as a request without the snippet gets it."""
    assert list(item) == [*REFERENCE_ITEM_KEYS, "section", "origin", "matched_fields",
                          *(["passage"] if "passage" in item else [])]
    if "passage" in item:
        assert item["passage"] == passage and passage.removesuffix("...") not in item["snippet"]
    else:  # left out: the snippet holds it
        assert passage.removesuffix("...") in item["snippet"]
    origin = item["origin"]
    assert origin["path"].endswith(item["path"]) and origin["bundle_id"] == bundle_id
    assert 1 <= origin["line_start"] <= origin["line_end"]
    chunk = file_lines(root, origin)
    assert hashlib.sha256(chunk).hexdigest() == origin["sha256"], (item["path"], origin)
    text = chunk.decode("utf-8", "replace")
    for word in passage_words(passage):
        assert word in text, (item["path"], origin, word)
    section = item["section"]
    assert list(section) == ["handle", "heading_path", "anchor"]
    assert section["handle"].startswith("llmwiki://") and "/pages/" in section["handle"]
    _, _, fragment = section["handle"].partition("#")
    assert unquote(fragment) == section["anchor"]
    if section["heading_path"]:  # the section starts at its own heading line
        assert text.lstrip("\ufeff").startswith("#"), (item["path"], text[:80])
    assert set(item["matched_fields"]) <= {"title", "heading", "body", "tag", "path", "alias"}


def queries_of(folder: str, source: KnowledgeSource) -> list[dict[str, Any]]:
    """The folder's judged queries, then one per visible page from its own title (so every
    shape is covered), and a literal one per page."""
    asked = [{"query": q["query"]} for q in JUDGED if q["folder"] == folder]
    for page in source.snapshot().approved_pages:
        asked.append({"query": page.title})
        asked.append({"query": page.title, "mode": "literal"})
    return asked


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_evidence_item_cites_lines_that_hold_its_passage(folder: str, tmp_path: Path) -> None:
    root = copy_fixture(folder, tmp_path / "wiki")
    source = KnowledgeSource(ServeSettings(root=root, page_cache=False, inotify=False))
    try:
        bundle_id = source.snapshot().bundle_id
        checked = 0
        for body in queries_of(folder, source):
            req = source.request(**body)
            pack = source.context(req)
            found = source.search(req).results
            passages = {i["page_id"]: i["passage"]
                        for i in source.search(source.request(**body, fields=NO_SNIPPET)).results}
            # Orientation items are the reference's: navigation, not what the question matched.
            assert all(list(item) == REFERENCE_ITEM_KEYS for item in pack["orientation"])
            for item in [*pack["evidence"], *found]:
                check_item(root, item, bundle_id, passages[item["page_id"]])
                checked += 1
            for item in pack["evidence"][:2]:  # the handle reads back the cited lines
                handle = item["section"]["handle"]
                read = source.read(handle)
                assert read.outcome == "found", item["section"]
                payload = read.payload
                assert isinstance(payload, dict)
                assert payload["origin"] == item["origin"]
                assert payload["heading_path"] == item["section"]["heading_path"]
                assert payload["handle"] == handle
                assert payload["anchor"] == unquote(handle.partition("#")[2])  # the fragment
                lines = file_lines(root, payload["origin"]).decode("utf-8", "replace")
                assert payload["text"].strip() in lines.replace("\r\n", "\n")
        assert checked >= 10, checked  # the folder's queries found evidence to check
    finally:
        source.close()


@pytest.mark.parametrize("folder", sorted(UNSERVABLE))
def test_the_shapes_left_out_have_nothing_to_cite(folder: str, tmp_path: Path) -> None:
    source = KnowledgeSource(ServeSettings(root=copy_fixture(folder, tmp_path), page_cache=False,
                                           inotify=False))
    try:
        with pytest.raises(WikiRootError):
            source.snapshot()
    finally:
        source.close()


ODD_FILES: dict[str, bytes] = {
    "crlf.md": (b"---\r\ntitle: CRLF\r\n---\r\n\r\nIntro\r\n\r\n# One\r\nalpha beta\r\n\r\n"
                b"## Two ##\r\ngamma\r\n"),
    "bom.md": b"\xef\xbb\xbf# Bom Page\nfirst words\n\n## Second\ndelta epsilon\n",
    "latin1.md": b"# Caf\xe9 Notes\ncaf\xe9 au lait\n\n## Menu\nzeta\n",
    "fenced.md": b"# Real\n\n```\n# not a heading\n```\n~~~\n## nor this\n~~~\n\n# Real\nagain\n\n\n",
    "no-newline.md": b"plain preamble text\n# Last\nend without newline",
}


@pytest.mark.parametrize("name", sorted(ODD_FILES))
def test_section_lines_and_hashes_are_those_on_disk(name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_bytes(ODD_FILES[name])
    result = read_file((name, str(path), name[:-3], ParseOptions(), 1 << 20, "", "topic"))
    assert result.page is not None
    table = result.page.section_table
    found = S.sections_of(table)
    assert found
    for section in [S.page_span(table), *found]:
        origin = {"path": name, "line_start": section.line_start, "line_end": section.line_end}
        chunk = file_lines(tmp_path, origin)
        assert hashlib.sha256(chunk).hexdigest() == section.sha256, (section, chunk)
        assert chunk.strip(), section  # no section is only blank lines
        if section.level > 0:
            assert chunk.lstrip(b"\xef\xbb\xbf").startswith(b"#"), chunk
    texts = S.section_texts(result.page.text, table, found)
    assert all(text.strip() for text in texts)


def test_heading_paths_anchors_and_fences() -> None:
    result_text = ODD_FILES["fenced.md"].decode()
    page = parse_page(result_text, "fenced.md", ParseOptions())
    found = S.sections_of(page.section_table)
    assert [(s.heading, s.anchor, s.line_start, s.line_end) for s in found] == [
        ("Real", "real", 1, 8), ("Real", "real-1", 10, 11)]
    crlf = parse_page(ODD_FILES["crlf.md"].decode().replace("\r\n", "\n"), "crlf.md", ParseOptions())
    assert [(s.path_text, s.anchor, s.level) for s in S.sections_of(crlf.section_table)] == [
        ("", "preamble", 0), ("One", "one", 1), ("One > Two", "two", 2)]


def test_an_explicit_heading_id_is_the_anchor_and_not_the_heading() -> None:
    text = ("# Guide {#start}\n\n## Naming event handlers {/*naming-event-handler-props*/}\n\n"
            "## Again {#start}\n\n## Not an id{#glued}\n\n## Braces {#}\n")
    page = parse_page(text, "guide.md", ParseOptions())
    assert [(s.path_text, s.anchor) for s in S.sections_of(page.section_table)] == [
        ("Guide", "start"),
        ("Guide > Naming event handlers", "naming-event-handler-props"),
        ("Guide > Again", "start-1"),  # still unique within the page
        ("Guide > Not an id{#glued}", "not-an-idglued"),  # an id follows a space or tab
        ("Guide > Braces {#}", "braces-")]


def test_handles_of_withheld_or_unknown_sections_answer_like_pages(tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path / "wiki")
    source = KnowledgeSource(ServeSettings(root=root, page_cache=False, inotify=False))
    try:
        p = source.snapshot()
        draft = next(page for page in p.pages if not page.approved)
        anchor = S.sections_of(draft.section_table)[0].anchor
        base = f"llmwiki://{p.source_id}/pages/{draft.id.replace('/', '%2F')}"
        for handle in (base, f"{base}#{anchor}", f"{base}#no-such-anchor"):
            read = source.read(handle)
            assert (read.outcome, read.payload) == ("withheld", source.read(draft.id).payload)
        topic = next(page for page in p.approved_pages if page.role == "topic")
        known = f"llmwiki://{p.source_id}/pages/{topic.id.replace('/', '%2F')}"
        assert source.read(known).outcome == "found"
        for handle in (f"{known}#no-such-anchor", f"llmwiki://other-source/pages/{topic.id}",
                       "llmwiki://", f"llmwiki://{p.source_id}/pages/", "llmwiki://x/y/pages/z",
                       f"llmwiki://{p.source_id}/pages/{topic.path.replace('/', '%2F')}"):
            read = source.read(handle)
            assert (read.outcome, read.payload) == ("missing", source.read("no/such/page").payload)
        whole = source.read(known).payload
        assert isinstance(whole, dict)
        assert whole["level"] == -1 and whole["anchor"] == "" and whole["sections"]
        first = source.read(whole["sections"][0]["handle"]).payload
        assert isinstance(first, dict)
        assert first["neighbours"]["previous"] is None and first["neighbours"]["parent"] == known
        if len(whole["sections"]) > 1:
            assert first["neighbours"]["next"] == whole["sections"][1]["handle"]
            second = source.read(whole["sections"][1]["handle"]).payload
            assert isinstance(second, dict)
            assert second["neighbours"]["previous"] == first["handle"]
    finally:
        source.close()


def test_the_passage_is_around_the_matched_terms_of_the_best_section(tmp_path: Path) -> None:
    root = tmp_path / "wiki"
    root.mkdir()
    filler = " ".join(f"word{n}" for n in range(400))
    (root / "index.md").write_text("# Home\n\nSee [[guide]].\n", encoding="utf-8")
    (root / "guide.md").write_text(
        f"---\ntitle: Guide\naliases: [Handbook]\n---\n# Guide\n\n{filler}\n\n## Setup\n\n{filler}\n"
        f"the zanzibar flag lives here\n\n## Rollback\n\nundo it\n", encoding="utf-8")
    source = KnowledgeSource(ServeSettings(root=root, page_cache=False, inotify=False))
    try:
        [item] = [i for i in source.search(source.request(query="zanzibar flag",
                                                          fields=NO_SNIPPET)).results
                  if i["page_id"] == "guide"]
        assert item["section"] == {"handle": "llmwiki://home/pages/guide#setup",
                                   "heading_path": "Guide > Setup", "anchor": "setup"}
        # Around the terms, and within the section (the page-level snippet runs on past it).
        assert "zanzibar flag" in item["passage"] and "Rollback" not in item["passage"]
        # With the snippet, which holds that passage, the item leaves the passage out.
        [whole] = [i for i in source.search(source.request(query="zanzibar flag")).results
                   if i["page_id"] == "guide"]
        assert "Rollback" in whole["snippet"] and item["passage"] in whole["snippet"]
        assert "passage" not in whole and whole == {k: v for k, v in item.items() if k != "passage"} | {
            "page_id": "guide", "snippet": whole["snippet"]}
        assert len(item["passage"]) <= 280
        assert item["matched_fields"] == ["body"]
        assert (item["origin"]["line_start"], item["origin"]["line_end"]) == (9, 12)
        [named] = [i for i in source.search(source.request(query="handbook rollback",
                                                           fields=NO_SNIPPET)).results
                   if i["page_id"] == "guide"]
        assert named["section"]["heading_path"] == "Guide > Rollback"
        assert named["matched_fields"] == ["heading", "body", "alias"]
        short = source.search(source.request(query="zanzibar", snippet_chars=40,
                                             fields=NO_SNIPPET)).results[0]
        assert "zanzibar" in short["passage"] and len(short["passage"]) <= 40
    finally:
        source.close()
