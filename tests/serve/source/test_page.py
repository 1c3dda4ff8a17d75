"""Page field derivation (contract 1.4.2-1.4.4), visibility (1.6) and section line ranges."""

from __future__ import annotations

import re
import zlib

import pytest

import serve.source.parse as page_module
from serve.source.page import Page, ParseOptions
from serve.source.parse import parse_page
from serve.watch.file_read import decode_text

GENERIC = ParseOptions()
DENDRON = ParseOptions(alias_target_last=True)
LOGSEQ = ParseOptions(logseq_titles=True)


def page(text: str, path: str = "notes/page.md", options: ParseOptions = GENERIC) -> Page:
    return parse_page(text, path, options)


def fm(block: str, body: str = "") -> str:
    return f"---\n{block}\n---\n{body}"


# -- id --------------------------------------------------------------------------------


def test_id_from_frontmatter_id_trimmed_and_suffix_dropped() -> None:
    assert page(fm("id: ' custom/A-Id.md '")).id == "custom/A-Id"


def test_id_from_object_id_when_no_id() -> None:
    assert page(fm("object_id: objects/thing.org")).id == "objects/thing"


def test_id_prefers_id_over_object_id() -> None:
    assert page(fm("id: chosen\nobject_id: ignored")).id == "chosen"


def test_id_backslashes_become_slashes() -> None:
    assert page(fm("id: 'dir\\sub\\leaf.md'")).id == "dir/sub/leaf"


def test_id_stringifies_scalars() -> None:
    assert page(fm("id: 42")).id == "42"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("notes/My Page.md", "notes/My Page"),
        ("pages/Org-Page.org", "pages/Org-Page"),
        ("top.md", "top"),
        ("a.b.c.md", "a.b.c"),
    ],
)
def test_id_falls_back_to_path_without_suffix(path: str, expected: str) -> None:
    assert page("no frontmatter", path).id == expected


# -- title -----------------------------------------------------------------------------


def test_title_from_frontmatter_wins_and_is_collapsed() -> None:
    assert page(fm("title: '  Big    Title '", "# Heading\n")).title == "Big Title"


def test_title_from_frontmatter_is_stringified() -> None:
    assert page(fm("title: 2026", "# Heading\n")).title == "2026"


def test_title_from_the_first_level_one_heading_only() -> None:
    text = "intro line\n### Deep    Heading\n# Top    Heading\n"
    assert page(text).title == "Top Heading"
    assert page("## Section only\n", "notes/my-note.md").title == "my note"


def test_title_skips_comment_lines_inside_code_fences() -> None:
    text = "```bash\n# install deps\n```\n\n# Real Title\n"
    assert page(text).title == "Real Title"


def test_title_falls_back_to_stem_with_dashes_as_spaces() -> None:
    assert page("plain text only", "notes/my-first--note.md").title == "my first note"


def test_logseq_title_decodes_namespace_separator() -> None:
    assert page("tags:: x\n- item", "pages/Project___Alpha.md", LOGSEQ).title == "Project/Alpha"


def test_namespace_separator_is_not_decoded_outside_logseq() -> None:
    assert page("- item", "pages/Project___Alpha.md").title == "Project___Alpha"


def test_org_page_title_falls_back_to_stem() -> None:
    parsed = page("* Org Page\nText [[Product]].\n** Notes\n", "pages/Org-Page.org", LOGSEQ)
    assert parsed.title == "Org-Page"
    assert parsed.headings == ()


# -- text and summary --------------------------------------------------------------------


def test_text_is_stripped_body_with_raw_markdown() -> None:
    parsed = page(fm("title: T", "\n\n# Heading\n\nBody text.\n\n"))
    assert parsed.text == "# Heading\n\nBody text."


def test_summary_removes_heading_markers_and_collapses_whitespace() -> None:
    parsed = page("# Title\n\nSome   text\n## Sub\nmore\ttext\n")
    assert parsed.summary == "Title Some text Sub more text"


def test_summary_of_exactly_360_chars_is_kept() -> None:
    body = "a" * 360
    assert page(body).summary == body


def test_summary_over_360_chars_is_cut_to_359_plus_ellipsis() -> None:
    body = "b" * 361
    assert page(body).summary == "b" * 359 + "..."


def test_summary_cut_is_right_stripped_before_ellipsis() -> None:
    body = "a" * 358 + " " + "c" * 20
    assert page(body).summary == "a" * 358 + "..."


def test_frontmatter_summary_and_description_are_ignored_for_summary() -> None:
    parsed = page(fm("summary: Custom summary\ndescription: Custom description", "Body words."))
    assert parsed.summary == "Body words."


def test_invalid_frontmatter_stays_in_text_and_summary() -> None:
    text = "---\ntitle: [unclosed\n---\n# Heading From Body\n\nBody.\n"
    parsed = page(text)
    assert parsed.frontmatter == {}
    assert parsed.title == "Heading From Body"
    assert parsed.text.startswith("---\ntitle: [unclosed\n---")
    assert parsed.summary == "--- title: [unclosed --- Heading From Body Body."
    assert parsed.degraded == "frontmatter_invalid"


def test_clean_page_is_not_degraded() -> None:
    assert page(fm("title: T", "body")).degraded == ""


def test_caller_degradation_is_kept() -> None:
    assert parse_page("# x", "x.md", GENERIC, degraded="not_utf8").degraded == "not_utf8"


def test_frontmatter_is_json_safe() -> None:
    parsed = page(fm("created: 2026-07-10\nat: 2026-07-10T10:00:00\nflag: yes"))
    assert parsed.frontmatter == {"created": "2026-07-10", "at": "2026-07-10T10:00:00", "flag": True}


# -- review_state and status -----------------------------------------------------------


@pytest.mark.parametrize("state", ["approved", "reviewed", "verified", "draft", "proposed", "needs_review"])
def test_review_state_known_values(state: str) -> None:
    assert page(fm(f"review_state: {state}")).review_state == state


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Approved", "approved"),
        ("'  NEEDS_REVIEW  '", "needs_review"),
        ("needs review", "unknown"),
        ("needs-review", "unknown"),
        ("published", "unknown"),
        ("yes", "unknown"),
    ],
)
def test_review_state_is_lowercased_and_mapped_exactly(raw: str, expected: str) -> None:
    assert page(fm(f"review_state: {raw}")).review_state == expected


def test_review_state_missing_is_unknown() -> None:
    assert page("no frontmatter").review_state == "unknown"


def test_review_state_falls_back_to_state() -> None:
    assert page(fm("state: verified")).review_state == "verified"


def test_review_state_wins_over_state() -> None:
    assert page(fm("review_state: draft\nstate: approved")).review_state == "draft"


def test_status_keeps_case_and_collapses_whitespace() -> None:
    assert page(fm("status: '  Needs   Review '")).status == "Needs Review"
    assert page(fm("status: Work-in-Progress")).status == "Work-in-Progress"
    assert page("no frontmatter").status == ""


# -- source_refs -----------------------------------------------------------------------


def test_source_refs_string_is_one_item_not_split_on_commas() -> None:
    assert page(fm("source_refs: 'SRC-1, SRC-2'")).source_refs == ("SRC-1, SRC-2",)


def test_source_refs_list_is_collapsed_and_deduplicated_casefold() -> None:
    parsed = page(fm("source_refs: [SRC-A, src-a, '  raw/paper   one.pdf ', '', 7]"))
    assert parsed.source_refs == ("SRC-A", "raw/paper one.pdf", "7")


def test_source_refs_fall_back_to_sources() -> None:
    assert page(fm("sources: [https://example.com/a]")).source_refs == ("https://example.com/a",)


@pytest.mark.parametrize("empty", ["[]", "''", "null", "false"])
def test_empty_source_refs_fall_back_to_sources(empty: str) -> None:
    assert page(fm(f"source_refs: {empty}\nsources: [FALLBACK]")).source_refs == ("FALLBACK",)


def test_source_refs_win_over_sources() -> None:
    assert page(fm("source_refs: [PRIMARY]\nsources: [SECONDARY]")).source_refs == ("PRIMARY",)


@pytest.mark.parametrize("value", ["5", "{a: b}", "true"])
def test_source_refs_of_other_types_are_empty(value: str) -> None:
    assert page(fm(f"source_refs: {value}")).source_refs == ()


# -- tags ------------------------------------------------------------------------------


def test_tags_frontmatter_then_inline_then_logseq_deduplicated() -> None:
    text = fm(
        "tags: [Release, ops]",
        "Body with #release and #ship-checks.\ntags:: logseq-one, #logseq-two\n#ops again #new\n",
    )
    # '#logseq-two' on the property line is also an inline tag, so it comes before 'new'.
    assert page(text).tags == ("Release", "ops", "ship-checks", "logseq-two", "new", "logseq-one")


def test_frontmatter_tag_string_is_one_tag() -> None:
    assert page(fm("tags: '#alpha, beta'")).tags == ("alpha, beta",)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("Issues #20 and #123 are numbers.", ()),
        ("Keep #review-41 please.", ("review-41",)),
        ("한국어 #태그1 태그", ("태그1",)),
        ("See http://x/#frag for details.", ()),
        ("word#x is not a tag", ()),
        ("a local anchor [[#local]] or [[Page#Part]]", ()),
        ("ends with #done. and #wow!? and #list,", ("done", "wow", "list")),
        ("path #project/alpha and #v1.2-beta", ("project/alpha", "v1.2-beta")),
        ("#_under #-dash #日本", ()),
        ("```\n#in-code block\n```", ()),
        ("- item\n  ~~~\n  #in-bullet-code\n  ~~~\n#after", ("after",)),
        ("inline `#code` and ``#two `ticks` here`` then #prose", ("prose",)),
        ("<span style='color:#abc'>#shown</span> <!-- #hidden -->", ("shown",)),
        ("colours #ccc #e5e5e5 #ff0000 #1a2b but #bad #cafe", ("bad", "cafe")),
        ("see https://example.com/page?x=1&y=-#frag and <https://a.b/-#frag2>", ()),
        ("[part](#anchor) [see](page.md#part) ## Heading {#custom-id}", ()),
        ("TODO [#A] task [#B] and [#Big] #D", ("Big", "D")),
        ("(#paren) [#bracket]", ("paren", "bracket")),
    ],
)
def test_inline_tag_syntax(body: str, expected: tuple[str, ...]) -> None:
    assert page(body).tags == expected


def test_logseq_tag_property_lines() -> None:
    text = "tags:: process, workflow\n  TAGS:: #Upper\n- tags:: #org-fixture\n"
    assert page(text, "pages/Workflow.md", LOGSEQ).tags == ("Upper", "org-fixture", "process", "workflow")


def test_local_anchor_wikilink_is_neither_tag_nor_link() -> None:
    parsed = page("Jump to [[#local]].")
    assert parsed.links == ()
    assert parsed.tags == ()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("```\n[[in fence]] [x](fence.md)\n```\n[[after]]", ("after",)),
        ("- bullet\n  ```js\n  [[in bullet fence]]\n  ```\n- [[prose]]", ("prose",)),
        ("`[[inline code]]` and `[x](code.md)` and [[prose]]", ("prose",)),
        ("<!-- [[commented]] --> <pre>[[pre]]</pre> [[prose]]", ("prose",)),
        ("```\nunclosed [[fence]] runs to the end", ()),
        ("a ``` b [[inline triple]] ``` c", ()),
        ("````\n```\n[[still fenced]]\n````\n[[out]]", ("out",)),
    ],
)
def test_links_come_from_prose_only(body: str, expected: tuple[str, ...]) -> None:
    assert page(body).links == expected


# -- links -----------------------------------------------------------------------------


def test_wikilinks_come_before_markdown_links() -> None:
    parsed = page("[first](first.md) then [[second]] and [third](sub/third.org)")
    assert parsed.links == ("second", "first", "sub/third")


def test_alias_target_first_by_default() -> None:
    assert page("[[target page|Shown Alias]]").links == ("target page",)


def test_alias_target_last_for_dendron() -> None:
    assert page("[[Review Note|process.review]]", options=DENDRON).links == ("process.review",)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[[page#Section]]", ("page",)),
        ("[x](doc.md#part)", ("doc",)),
        ("[[./rel/page.md]]", ("rel/page",)),
        ("[x](./a.md)", ("a",)),
        ("[[ spaced ]]", ("spaced",)),
        ("[[dir\\page]]", ("dir/page",)),
        ("![[embedded]]", ("embedded",)),
        ("![img](pic.md)", ("pic",)),
        ("[web](https://example.com/x.md)", ("https://example.com/x",)),
        ("[no ext](page) [pdf](paper.pdf) [](empty.md)", ()),
        ("[[Page]] [[page]] [[PAGE|x]]", ("Page",)),
        ("[[]] [[#]]", ()),
    ],
)
def test_link_normalisation(body: str, expected: tuple[str, ...]) -> None:
    assert page(body).links == expected


# -- headings --------------------------------------------------------------------------


def test_headings_regex_rules() -> None:
    body = (
        "# One\n"
        "##   Two   spaced   \n"
        "### Closing ##\n"
        "#nospace\n"
        "####### seven\n"
        "  # indented\n"
        "```bash\n# shell comment\n```\n"
        "~~~\n# tilde fence\n~~~\n"
        "###### Six\n"
        "#\n\nnot a heading\n"
    )
    assert page(body).headings == ("One", "Two spaced", "Closing ##", "Six")


def test_only_first_40_headings_are_kept() -> None:
    body = "\n".join(f"## H{i}\ntext" for i in range(50))
    headings = page(body).headings
    assert len(headings) == 40
    assert headings[0] == "H0"
    assert headings[-1] == "H39"


# -- updated_at ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("updated_at: 2026-01-02", "2026-01-02"),
        ("updated_at: 2026-01-02 10:00:00", "2026-01-02 10:00:00"),
        ("updated_at: 2026-01-02T10:00:00", "2026-01-02 10:00:00"),
        ("last_updated: 2026-03-04", "2026-03-04"),
        ("updated_at: 2026-05-06\nlast_updated: 1999-01-01", "2026-05-06"),
        ("updated_at: '  yesterday   evening '", "yesterday evening"),
        ("title: none", ""),
    ],
)
def test_updated_at_is_python_str_of_the_value(block: str, expected: str) -> None:
    assert page(fm(block)).updated_at == expected


# -- visibility (1.6) ------------------------------------------------------------------


@pytest.mark.parametrize(
    "block",
    [
        "draft: true",
        "draft: yes",
        "draft: 'true'",
        "draft: 'Yes'",
        "draft: 'y'",
        "draft: 'on'",
        "draft: '1'",
        "published: false",
        "published: 'false'",
        "published: '0'",
        "published: 'no'",
        "published: 'n'",
        "published: 'Off'",
        "publish: false",
        "publish: 'false'",
        "review_state: draft",
        "review_state: proposed",
        "review_state: needs_review",
        "state: proposed",
        "status: draft",
        "status: proposed",
        "status: needs_review",
        "status: Needs Review",
        "status: NEEDS-REVIEW",
        "status: blocked",
        "status: unpublished",
        "status: Private",
        "status: hidden",
        "status: embargoed",
        "status: confidential",
        "status: internal",
        "status: withheld",
        "review_state: approved\nstatus: private",
        "status: evergreen\ndraft: true",
    ],
)
def test_withheld(block: str) -> None:
    assert page(fm(block, "# Page\n")).approved is False


@pytest.mark.parametrize(
    "block",
    [
        "title: Plain",
        "draft: false",
        "draft: 'false'",
        "draft: 'no'",
        "draft: 1",
        "draft: 0",
        "published: true",
        "published: 0",
        "publish: 'true'",
        "publish: 2026-07-10",
        "review_state: approved",
        "review_state: reviewed",
        "review_state: verified",
        "review_state: needs review",
        "status: evergreen",
        "status: current",
        "status: mature",
        "status: developing",
        "status: approved",
        "status: published",
        "status: stable",
        "status: deprecated",
        "status: Work-in-Progress",
    ],
)
def test_served(block: str) -> None:
    assert page(fm(block, "# Page\n")).approved is True


def test_page_without_frontmatter_is_served() -> None:
    parsed = page("# Page\n")
    assert parsed.approved is True
    assert parsed.review_state == "unknown"


# -- sections and line ranges ----------------------------------------------------------


def test_sections_after_frontmatter_point_at_file_lines() -> None:
    text = "---\ntitle: T\n---\n# H1\nx\n## H2\ny\n# H3\nz"
    parsed = page(text)
    assert parsed.body_line == 3
    assert parsed.line_count == 9
    assert [(s.heading, s.level, s.start_line, s.end_line) for s in parsed.sections] == [
        ("H1", 1, 4, 7),
        ("H2", 2, 6, 7),
        ("H3", 1, 8, 9),
    ]
    lines = text.split("\n")
    for section in parsed.sections:
        assert lines[section.start_line - 1].lstrip("#").strip() == section.heading


def test_sections_without_frontmatter_start_at_line_one() -> None:
    parsed = page("# A\ntext\n## B\nmore")
    assert parsed.body_line == 1
    assert [(s.heading, s.start_line, s.end_line) for s in parsed.sections] == [("A", 1, 4), ("B", 3, 4)]


def test_sections_when_frontmatter_is_broken_count_from_the_file_start() -> None:
    text = "---\ntitle: [unclosed\ntags: nope\n---\n# Heading From Body\n\nText"
    parsed = page(text)
    assert parsed.body_line == 1
    assert [(s.heading, s.start_line) for s in parsed.sections] == [("Heading From Body", 5)]


def test_sections_after_non_mapping_frontmatter() -> None:
    parsed = page("---\n- a\n- b\n---\n\n# After\nx")
    assert parsed.body_line == 4
    assert [(s.heading, s.start_line, s.end_line) for s in parsed.sections] == [("After", 6, 7)]


def test_sections_of_decoded_crlf_file_match_lf_lines() -> None:
    text, _ = decode_text(b"---\r\ntitle: CRLF\r\n---\r\n# One\r\n\r\n## Two\r\nend")
    parsed = page(text)
    assert [(s.heading, s.start_line, s.end_line) for s in parsed.sections] == [
        ("One", 4, 7),
        ("Two", 6, 7),
    ]


def test_sections_skip_comment_lines_in_code_fences() -> None:
    parsed = page("# Top\n```\n# comment\n```\n## Next\nafter")
    assert [(s.heading, s.start_line, s.end_line) for s in parsed.sections] == [
        ("Top", 1, 6),
        ("Next", 5, 6),
    ]


def test_empty_file() -> None:
    parsed = page("", "empty-page.md")
    assert parsed.line_count == 0
    assert parsed.sections == ()
    assert parsed.title == "empty page"
    assert parsed.text == ""
    assert parsed.summary == ""


# -- wiki-level keys and payload -------------------------------------------------------


def test_wiki_title_and_description_are_read() -> None:
    parsed = page(fm("wiki_title: '  My   Wiki '\ndescription: About it."))
    assert parsed.wiki_title == "My Wiki"
    assert parsed.description == "About it."


def test_payload_wire_order_and_values() -> None:
    parsed = page(
        fm(
            "id: p1\ntitle: Payload\nreview_state: approved\nstatus: current\n"
            "source_refs: [S1]\ntags: [t]\nupdated_at: 2026-07-10",
            "# Payload\n\nSee [[other]].\n",
        ),
        "dir/p1.md",
    )
    payload = parsed.payload()
    assert list(payload) == [
        "id", "title", "path", "role", "text", "summary", "frontmatter", "review_state",
        "status", "source_refs", "tags", "links", "headings", "updated_at", "okf",
    ]
    assert payload["id"] == "p1"
    assert payload["path"] == "dir/p1.md"
    assert payload["role"] == "topic"
    assert payload["source_refs"] == ["S1"]
    assert payload["tags"] == ["t"]
    assert payload["links"] == ["other"]
    assert payload["headings"] == ["Payload"]
    assert payload["updated_at"] == "2026-07-10"
    assert payload["frontmatter"]["updated_at"] == "2026-07-10"
    assert payload["okf"] is None


# -- the scans that skip to lines starting with '#' ---------------------------------------

TRICKY_BODIES = [
    "",
    "#",
    "# ",
    "#\n",
    "# Title",
    "#Title\n# Real",
    "#\n# x\n",
    "#\n\n# x",
    "# \n## y",
    "# a\n\n## b\n",
    "####### seven\n###### six",
    "text # not a heading\n  # indented\n#\ttab\n",
    "```\n# comment\n```\n# After\n",
    "# A   \n#    B    C   \n\n\n### D",
    "\n\n# late start\n#\n#\n#\n# end",
    "# 한국어 제목\n## 두 번째\n",
    "#" * 3 + "\n" + "\n" * 3 + "word",
]


@pytest.mark.parametrize("body", TRICKY_BODIES)
def test_heading_scan_matches_a_line_by_line_reading(body: str) -> None:
    expected = []
    offset = 0
    fenced = False
    for line in body.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        else:
            hit = re.match(r"(#{1,6})\s+(.+?)\s*$", line)
            if hit and not fenced:
                expected.append((" ".join(hit.group(2).split()), len(hit.group(1)), offset))
        offset += len(line) + 1
    fences = page_module.prose.fence_spans(body)
    assert page_module.headings_of(body, fences) == expected


def reference_summary(body: str) -> str:
    """The summary's definition, over the whole body."""
    summary = page_module.collapse(page_module.HEADING_PREFIX_RE.sub("", body))
    if len(summary) > page_module.SUMMARY_CHARS:
        summary = summary[: page_module.SUMMARY_CHARS - 1].rstrip() + "..."
    return summary


@pytest.mark.parametrize("line", ["word " * 100, "w " * 3, "# Heading", "#", "## x\n\n", " " * 50])
@pytest.mark.parametrize("count", [1, 3, 40, 400])
def test_summary_from_a_prefix_equals_the_summary_of_the_whole_body(line: str, count: int) -> None:
    body = "\n".join(f"{line}{i}" if i % 7 else line for i in range(count))
    assert page_module.summarize(body) == reference_summary(body)


def test_sections_beyond_the_heading_limit_end_at_the_next_heading_of_all() -> None:
    body = "\n".join(f"{'#' * (1 + i % 3)} H{i}\ntext" for i in range(page_module.MAX_HEADINGS + 5))
    parsed = page(body)
    assert len(parsed.sections) == len(parsed.headings) == page_module.MAX_HEADINGS
    last = parsed.sections[-1]
    # It ends before H42 (line 85), a heading past the limit, not at the end of the file.
    assert (last.heading, last.level, last.start_line, last.end_line) == ("H39", 1, 79, 84)


def test_text_round_trips_through_its_compression() -> None:
    body = "# Title\n\n" + "Ünïcode, 한국어 and `code` " * 200
    assert page(body).text == body.strip()
    assert zlib.decompress(page_module.compress_text(body)).decode("utf-8") == body
