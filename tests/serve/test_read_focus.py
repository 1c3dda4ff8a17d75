"""Focused and budgeted reads, core only: sections, matching, scoring, selection, budgets."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from serve.reads.focus import (
    FOCUSED_DEFAULT_MAX_CHARS,
    ReadOptions,
    TextSection,
    clip,
    focused_read,
    match_sections,
    plain_read,
    query_terms,
    read_payload,
    score_sections,
    select_by_score,
    split_sections,
    strip_particle,
)
from serve.settings import ServeSettings, SettingsError, resolve_settings
from serve.source.page import Page, ParseOptions
from serve.source.parse import parse_page

FOCUSED_KEYS = ["id", "title", "path", "role", "summary", "review_state", "status", "updated_at",
                "tags", "read_mode", "query", "requested_sections", "matched", "outline",
                "selected_sections", "text", "total_chars", "returned_chars", "max_chars",
                "truncated", "remaining_sections", "unmatched_sections", "links"]
NESTED = """Intro before any heading.

# Install

Get it.

## On Linux

apt.

### From source

make.

## On Windows

msi.

# Usage

Run it.

### Flags

--help.
"""


def page_of(body: str, path: str = "notes/page.md") -> Page:
    return parse_page(f"---\ntitle: Test Page\n---\n{body}", path, ParseOptions())


def indexes(sections: list[TextSection]) -> list[str]:
    return [s.index for s in sections]


# -- splitting and numbering ------------------------------------------------------------


def test_preamble_is_section_zero_and_blank_preamble_is_dropped() -> None:
    sections = split_sections("Intro text.\n\n# First\n\nbody")
    assert [(s.index, s.heading) for s in sections] == [("0", "(preamble)"), ("1", "First")]
    assert sections[0].text == "Intro text."
    assert [s.index for s in split_sections("   \n\n# First\nbody")] == ["1"]
    assert [s.index for s in split_sections("no headings at all")] == ["0"]
    assert split_sections("") == []


def test_nested_numbering_follows_heading_levels() -> None:
    sections = split_sections(NESTED)
    assert [(s.index, s.heading) for s in sections] == [
        ("0", "(preamble)"), ("1", "Install"), ("1.1", "On Linux"), ("1.1.1", "From source"),
        ("1.2", "On Windows"), ("2", "Usage"), ("2.1", "Flags")]  # a skipped level still nests
    assert sections[3].path == ("Install", "On Linux", "From source")
    # A document that starts below level 1 numbers its top headings 1, 2, ...
    assert indexes(split_sections("## A\n\n## B\n\n# C\n\n## D")) == ["1", "2", "3", "3.1"]


def test_section_text_runs_to_the_next_heading_of_any_level() -> None:
    sections = split_sections(NESTED)
    assert sections[1].text == "# Install\n\nGet it."
    assert sections[1].body == "Get it."
    assert sections[1].chars == len("# Install\n\nGet it.")
    assert NESTED[sections[2].start:sections[2].end] == sections[2].text


def test_fenced_code_lines_are_not_headings() -> None:
    body = ("# Real\n\n```bash\n# not a heading\n## nor this\n```\n\n~~~\n# tilde fence\n~~~\n\n"
            "````\n```\n# still code: a shorter fence does not close\n````\n\n## Second\n")
    sections = split_sections(body)
    assert [s.heading for s in sections] == ["Real", "Second"]
    assert "# still code" in sections[0].text


def test_heading_syntax_closing_hashes_and_non_headings() -> None:
    body = "## Setup ##\n\n# C#\n\n#hashtag line\n\n####### seven\n\n###\tTabbed   title #\n"
    assert [s.heading for s in split_sections(body)] == ["Setup", "C#", "Tabbed title"]


def test_outline_labels() -> None:
    page = page_of(NESTED)
    payload = focused_read(page, ReadOptions(sections=("1.2",)))
    assert payload["outline"][:3] == ["0 (preamble) (25)", "1 Install (18)", "1.1 On Linux (17)"]
    assert payload["outline"][-1] == "2.1 Flags (18)"


# -- sections matching ------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "expected"), [
    ("1.1", ["1.1", "1.1.1"]),  # by number, with descendants
    ("0", ["0"]),
    ("2", ["2", "2.1"]),
    ("on windows", ["1.2"]),  # exact heading, case-folded
    ("## On Windows", ["1.2"]),  # a leading '#' is ignored
    ("ＵＳＡＧＥ", ["2", "2.1"]),  # NFKC: full-width letters
    ("source", ["1.1.1"]),  # substring
    ("on", ["1.1", "1.1.1", "1.2"]),  # substring hits every heading containing it
])
def test_sections_spec_matching(spec: str, expected: list[str]) -> None:
    chosen, unmatched = match_sections(split_sections(NESTED), [spec])
    assert indexes(chosen) == expected
    assert unmatched == []


def test_exact_heading_wins_over_substring() -> None:
    sections = split_sections("# Install\n\na\n\n# Install on Windows\n\nb")
    assert indexes(match_sections(sections, ["install"])[0]) == ["1"]


def test_unmatched_specs_and_duplicates() -> None:
    chosen, unmatched = match_sections(split_sections(NESTED), ["9.9", "#", "nowhere", "2.1", "2"])
    assert indexes(chosen) == ["2.1", "2"]  # no section twice; spec order kept
    assert unmatched == ["9.9", "#", "nowhere"]


# -- query terms and scoring ------------------------------------------------------------


def test_korean_particles_are_stripped_longest_first() -> None:
    assert strip_particle("서버에서는") == "서버"  # not 서버에서 (는 alone)
    assert strip_particle("확인입니다") == "확인"
    assert strip_particle("서명을") == "서명"
    assert strip_particle("고양이") == "고양"
    assert strip_particle("나는") == "나는"  # stripping would leave one char
    assert strip_particle("release") == "release"


def test_query_terms_fold_filter_dedupe_and_hangul_bigrams() -> None:
    terms = query_terms("Ｒelease a release 배포에서는 체크리스트를 v2")
    assert terms == [("release", ()), ("배포", ()), ("체크리스트", ("체크", "크리", "리스", "스트")),
                     ("v2", ())]


def test_score_formula_worked_example() -> None:
    # S = 3 sections; "deploy" is in Alpha's body (3 times) and Beta's heading: df = 2,
    # w = ln(4/3) = 0.28768. Alpha: w * (1 + 0.25 * 2) = 0.43152. Beta: 3w = 0.86305.
    sections = split_sections("# Alpha\n\ndeploy deploy deploy\n\n# Beta deploy\n\nnothing here\n\n"
                              "# Gamma\n\nother text")
    w = math.log(4 / 3)
    assert round(w * 1.5, 3) == 0.432 and round(3 * w, 3) == 0.863
    assert score_sections(sections, "deploy") == [0.432, 0.863, 0.0]
    # A term in every section has weight ln(1) = 0, floored to 0.1.
    everywhere = split_sections("# A\n\ncommon\n\n# B\n\ncommon\n\n# C\n\ncommon")
    assert score_sections(everywhere, "common") == [0.1, 0.1, 0.1]
    # The body count bonus stops at 4 extra hits: 1 + 0.25 * 4 = 2.
    many = split_sections("# A\n\n" + "word " * 9 + "\n\n# B\n\nnone")
    assert score_sections(many, "word") == [round(math.log(3 / 2) * 2, 3), 0.0]


def test_score_formula_hangul_bigrams_worked_example() -> None:
    # Query term 체크리 (S = 2). df(체크리) = 1 -> w = ln(3/2) = 0.405465.
    # Bigram 체크: S1 heading, S2 body -> df 2 -> w = max(ln(1), 0.1) = 0.1.
    # Bigram 크리: S2 body only -> w = 0.405465. Each bigram counts w / 2.
    # S1 = 0.1/2 * 1.5 = 0.075; S2 = 0.405465 + 0.1/2 + 0.405465/2 = 0.658.
    sections = split_sections("# 체크 항목\n\n내용\n\n# 기타\n\n크리스마스 체크리스트")
    assert score_sections(sections, "체크리") == [0.075, 0.658]


def test_heading_path_counts_for_descendants() -> None:
    sections = split_sections("# Deploy\n\nintro\n\n## Steps\n\nrun it\n\n# Other\n\nnone")
    scores = score_sections(sections, "deploy")
    w = math.log(4 / 3)  # df = 2: Steps has Deploy in its heading path
    assert scores == [round(3 * w, 3), round(3 * w, 3), 0.0]


# -- selection --------------------------------------------------------------------------


def test_selection_threshold_and_order() -> None:
    sections = split_sections("\n\n".join(f"# S{i}\n\ntext" for i in range(5)))
    assert indexes(select_by_score(sections, [1.8, 5.0, 1.7, 0.9, 1.75])) == ["2", "1", "5"]
    # With a low top score the floor of 1.0 decides.
    assert indexes(select_by_score(sections, [2.0, 1.0, 0.99, 0.0, 1.0])) == ["1", "2", "5"]
    assert select_by_score(sections, [0.9, 0.5, 0.0, 0.0, 0.0]) == []


def test_selection_keeps_at_most_six_best_first() -> None:
    sections = split_sections("\n\n".join(f"# S{i}\n\ntext" for i in range(9)))
    scores = [2.0, 2.0, 2.0, 2.0, 3.0, 2.0, 2.0, 2.0, 2.0]
    assert indexes(select_by_score(sections, scores)) == ["5", "1", "2", "3", "4", "6"]


def test_requested_sections_come_first_then_query_hits() -> None:
    page = page_of(NESTED)
    payload = focused_read(page, ReadOptions(query="apt make", sections=("usage",)))
    assert [s["index"] for s in payload["selected_sections"]] == ["2", "2.1", "1.1", "1.1.1"]
    assert payload["matched"] is True
    assert all("score" in s for s in payload["selected_sections"])
    # Text is in document order whatever the rank order.
    assert payload["text"].index("## On Linux") < payload["text"].index("# Usage")


def test_nothing_selected_returns_first_section_unmatched() -> None:
    payload = focused_read(page_of(NESTED), ReadOptions(query="zebra"))
    assert payload["matched"] is False
    assert payload["selected_sections"] == [{"index": "0", "heading": "(preamble)", "chars": 25,
                                             "score": 0.0}]
    assert payload["text"] == "Intro before any heading."
    only_unmatched = focused_read(page_of(NESTED), ReadOptions(sections=("nowhere",)))
    assert only_unmatched["matched"] is False
    assert only_unmatched["unmatched_sections"] == ["nowhere"]
    assert "score" not in only_unmatched["selected_sections"][0]
    assert "query" not in only_unmatched


# -- budgets ----------------------------------------------------------------------------


def test_clip_rule_prefers_a_late_newline() -> None:
    assert clip("short", 200) == "short"
    late = "a" * 150 + "\n" + "b" * 100
    assert clip(late, 200) == "a" * 150 + "\n"  # newline at 150 >= 60 % of 200
    early = "a" * 100 + "\n" + "b" * 150
    assert clip(early, 200) == early[:200]  # newline at 100 < 120: hard cut
    edge = "a" * 120 + "\n" + "b" * 150
    assert clip(edge, 200) == "a" * 120 + "\n"  # exactly 60 % counts
    assert clip("x" * 300, 200) == "x" * 200


def long_page() -> Page:
    body = "\n\n".join(f"# Part {i}\n\n" + f"topic{i} " * 20 + "alpha" for i in range(1, 5))
    return page_of(body)


def test_focused_budget_takes_sections_while_they_fit() -> None:
    page = long_page()
    sizes = [len(s.text) for s in split_sections(page.text)]
    assert sizes[0] == 155
    payload = focused_read(page, ReadOptions(sections=("1", "3", "2"), max_chars=400))
    # 155 + 2 + 155 = 312 fits; the third (2 more + 155) does not.
    assert [s["index"] for s in payload["selected_sections"]] == ["1", "3"]
    assert payload["text"] == page.text.split("\n\n# Part 2")[0] + "\n\n" + split_sections(
        page.text)[2].text
    assert payload["remaining_sections"] == ["2 Part 2 (155)"]
    assert payload["truncated"] is True
    assert payload["returned_chars"] == 312 == len(payload["text"])
    assert payload["total_chars"] == len(page.text)
    assert payload["max_chars"] == 400


def test_focused_budget_clips_an_oversized_first_section() -> None:
    page = long_page()
    payload = focused_read(page, ReadOptions(sections=("2", "1"), max_chars=10))  # clamped to 200
    assert payload["max_chars"] == 200
    assert payload["text"] == clip(split_sections(page.text)[1].text, 200)
    assert payload["returned_chars"] == len(payload["text"]) <= 200
    assert [s["index"] for s in payload["selected_sections"]] == ["2"]
    assert payload["remaining_sections"] == ["1 Part 1 (155)"]
    assert payload["truncated"] is True
    wide = focused_read(page, ReadOptions(sections=("2",)))
    assert wide["max_chars"] == FOCUSED_DEFAULT_MAX_CHARS and wide["truncated"] is False


def test_focused_payload_keys_and_links() -> None:
    page = page_of("# One\n\nSee [[other]].\n\n# Two\n\nmore", path="a.md")
    payload = focused_read(page, ReadOptions(query="  one  ", sections=("9",), include_links=True))
    assert list(payload) == FOCUSED_KEYS
    assert payload["read_mode"] == "focused" and payload["query"] == "one"
    assert payload["links"] == ["other"]
    for omitted in ("frontmatter", "source_refs", "headings", "okf"):
        assert omitted not in payload
    plain_keys = [k for k in FOCUSED_KEYS
                  if k not in ("query", "requested_sections", "unmatched_sections", "links")]
    assert list(focused_read(page, ReadOptions(sections=("1",)))) == [
        *plain_keys[:10], "requested_sections", *plain_keys[10:]]
    assert "links" not in focused_read(page, ReadOptions(query="one", include_links=False))


def test_plain_read_without_budget_is_the_wiki_page() -> None:
    page = long_page()
    assert plain_read(page, None) == page.payload()
    assert plain_read(page, None, max_chars=100_000) == page.payload()
    assert "links" not in plain_read(page, None, include_links=False)
    assert read_payload(page, ["id"], ReadOptions(query="   ")) == {"id": page.id}  # blank: plain


def test_plain_budget_clips_and_lists_remaining_sections() -> None:
    page = long_page()
    payload = plain_read(page, None, max_chars=400)
    assert list(payload)[-4:] == ["truncated", "total_chars", "returned_chars",
                                  "remaining_sections"]
    assert payload["text"] == clip(page.text, 400)
    assert payload["returned_chars"] == len(payload["text"])
    assert payload["total_chars"] == len(page.text)
    # Parts 1 and 2 end at 155 and 312; part 3 is cut (after its heading line).
    assert payload["remaining_sections"] == ["3 Part 3 (155)", "4 Part 4 (155)"]


def test_plain_budget_default_clamp_and_fields() -> None:
    page = long_page()
    assert plain_read(page, None, default_max_chars=200)["returned_chars"] <= 200
    assert "truncated" not in plain_read(page, None, max_chars=10**9, default_max_chars=200)
    assert len(plain_read(page, None, max_chars=1)["text"]) <= 200  # clamped up to 200
    kept = plain_read(page, ["title", "id"], max_chars=300)
    assert list(kept) == ["id", "title", "truncated", "total_chars", "returned_chars",
                          "remaining_sections"]
    assert list(plain_read(page, [], max_chars=300)) == ["truncated", "total_chars",
                                                         "returned_chars", "remaining_sections"]


def test_read_default_max_chars_setting(tmp_path: Path) -> None:
    assert ServeSettings(root=tmp_path).read_default_max_chars is None
    env = {"LLMWIKI_READ_DEFAULT_MAX_CHARS": "500"}
    assert resolve_settings(tmp_path, {}, env).read_default_max_chars == 500
    assert resolve_settings(tmp_path, {"read_default_max_chars": 900}, env).read_default_max_chars == 900
    with pytest.raises(SettingsError, match="read_default_max_chars must be between 200 and 1000000"):
        ServeSettings(root=tmp_path, read_default_max_chars=199)
    with pytest.raises(SettingsError, match="LLMWIKI_READ_DEFAULT_MAX_CHARS must be an integer"):
        resolve_settings(tmp_path, {}, {"LLMWIKI_READ_DEFAULT_MAX_CHARS": "lots"})
