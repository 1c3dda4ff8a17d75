"""Titles, aliases and property links per shape (issue 15; docs/metadata-rules.md)."""

from __future__ import annotations

import json

import pytest

from serve.source import names
from serve.source.layout import jsonc_text
from serve.source.page import Page, ParseOptions
from serve.source.parse import parse_page

GENERIC = ParseOptions()
OBSIDIAN = ParseOptions(titles=names.TITLE_FILE)
LOGSEQ = ParseOptions(logseq_titles=True, titles=names.TITLE_LOGSEQ)
DENDRON = ParseOptions(alias_target_last=True, titles=names.TITLE_FRONTMATTER)


def page(text: str, path: str, options: ParseOptions) -> Page:
    return parse_page(text, path, options)


# -- titles ---------------------------------------------------------------------------------


def test_obsidian_title_is_the_file_name_not_a_heading() -> None:
    assert page("# Styling Tasks\n\ntext\n", "Advanced/Styling.md", OBSIDIAN).title == "Styling"
    assert page("## Change the title\n", "Callouts.md", OBSIDIAN).title == "Callouts"
    assert page("x\n", "notes/my-note.md", OBSIDIAN).title == "my-note"  # as it is


def test_obsidian_frontmatter_title_wins() -> None:
    assert page("---\ntitle: Shown\n---\n# Other\n", "a.md", OBSIDIAN).title == "Shown"


@pytest.mark.parametrize(("stem", "title"), [
    ("What is DXF%3F", "What is DXF?"),
    ("Project___Alpha", "Project/Alpha"),
    ("legacy%2Fnamespace", "legacy/namespace"),
    ("a%3A b%23c", "a: b#c"),
    ("B-splines", "B-splines"),
    ("100% sure", "100% sure"),  # not an escape: kept
])
def test_logseq_title_decodes_file_name_escapes(stem: str, title: str) -> None:
    assert page("- a block\n", f"pages/{stem}.md", LOGSEQ).title == title


def test_logseq_title_property_wins_and_headings_never_do() -> None:
    text = "title:: Shown Name\nalias:: other\n\n- ## See also\n"
    assert page(text, "pages/shown_name.md", LOGSEQ).title == "Shown Name"
    assert page("- ## See also\n- [[x]]\n", "pages/DXF.md", LOGSEQ).title == "DXF"
    assert page("- title:: Bulleted\n", "pages/b.md", LOGSEQ).title == "Bulleted"
    assert page("#+title: Org Name\n* Heading\n", "pages/o.org", LOGSEQ).title == "Org Name"


def test_logseq_property_after_content_is_not_the_page_title() -> None:
    assert page("- text\n- title:: Later\n", "pages/p.md", LOGSEQ).title == "p"


def test_dendron_title_is_frontmatter_title() -> None:
    text = "---\nid: abc\ntitle: Time Off\n---\n## Policy\n"
    assert page(text, "handbook.sop.time-off.md", DENDRON).title == "Time Off"
    assert page("## Policy\n", "handbook.sop.md", DENDRON).title == "handbook.sop"


def test_generic_title_is_frontmatter_then_level_one_heading_then_file_name() -> None:
    assert page("---\ntitle: T\n---\n# H\n", "x.md", GENERIC).title == "T"
    assert page("intro\n## Section\n# Page Name\n", "x.md", GENERIC).title == "Page Name"
    assert page("## Section only\n", "docs/link.md", GENERIC).title == "link"


# -- aliases --------------------------------------------------------------------------------


def test_obsidian_aliases_list_and_single_string() -> None:
    listed = page("---\naliases:\n  - One\n  - '[[Two]]'\n---\nx\n", "a.md", OBSIDIAN)
    assert listed.aliases == ("One", "Two")
    assert page("---\naliases: Solo Name\n---\nx\n", "a.md", OBSIDIAN).aliases == ("Solo Name",)
    assert page("---\nalias: Other\n---\nx\n", "a.md", OBSIDIAN).aliases == ("Other",)


def test_logseq_alias_property_single_and_list() -> None:
    assert page("alias:: config file\n\n- x\n", "pages/config files.md", LOGSEQ).aliases == \
        ("config file",)
    listed = page("alias:: ODAFC, [[ODA File Converter]]\n- x\n", "pages/ODA.md", LOGSEQ)
    assert set(listed.aliases) == {"ODAFC", "ODA File Converter"}


def test_an_alias_equal_to_the_title_is_dropped() -> None:
    assert page("---\naliases: [a]\n---\n", "a.md", OBSIDIAN).aliases == ()


# -- links ----------------------------------------------------------------------------------


def test_obsidian_frontmatter_property_links_are_links() -> None:
    text = ('---\ncategories: "[[Places]]"\ntype:\n  - "[[Cafes|cafe]]"\n  - plain\n'
            'aliases: ["[[Not A Link]]"]\n---\nSee [[Body Link]].\n')
    assert page(text, "Blue Bottle.md", OBSIDIAN).links == ("Body Link", "Places", "Cafes")


def test_dendron_cross_vault_links_name_the_note() -> None:
    text = ("---\nid: x\ntitle: X\n---\n"
            "[[Communication|dendron://dendron.handbook/handbook.sop.communication#part]] and "
            "[[dendron://other/notes.a]]\n")
    assert page(text, "x.md", DENDRON).links == ("handbook.sop.communication", "notes.a")


def test_block_and_heading_references_name_the_note() -> None:
    text = "[[Note^abc123]] [[Other#^blk]] [[#Local heading]] [[Third#Part]]\n"
    assert page(text, "x.md", GENERIC).links == ("Note", "Other", "Third")


# -- shape detection helpers ----------------------------------------------------------------


def test_jsonc_comments_and_trailing_commas_are_dropped_strings_kept() -> None:
    text = ('{\n  // See https://go.microsoft.com/fwlink\n  "recommendations": [\n'
            '    "foam.foam-vscode", /* the core */\n    "a//b", // last\n  ],\n}\n')
    assert json.loads(jsonc_text(text)) == {"recommendations": ["foam.foam-vscode", "a//b"]}
