"""Natural-question ranking rules: filler words (question.py) and field weights (fields.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from serve.retrieval.analyzer import analyze
from serve.retrieval.fields import HUB_FACTOR, NAME_WEIGHT, is_hub, keyed_terms, names_page, weigh_fields
from serve.retrieval.fields import field_factor as _field_factor
from serve.retrieval.question import asked_terms, content_text, question_terms
from serve.retrieval.scoring import lead_terms
from serve.service import KnowledgeSource
from serve.settings import ServeSettings


def test_english_question_words_are_dropped() -> None:
    assert content_text("How do I publish my notes as a website?") == "publish notes as a website"
    assert content_text("Which page explains the release freeze?") == "explains the release freeze"
    assert question_terms("What is the difference between a block embed and a block reference?") \
        == analyze("difference between block embed block reference")


def test_korean_question_words_are_dropped_by_their_stems() -> None:
    # A word goes when what it is made of only asks (mecab-ko's stems, whatever the ending:
    # "무엇인가요", "하나요", "해야"); a content word keeps its particle and ending (the
    # analyzer indexes its stem beside it); a Latin word loses its particle.
    assert content_text("작업을 내일로 미루려면 어떻게 하나요?") == "작업을 내일로 미루려면"
    assert "미루" in question_terms("작업을 내일로 미루려면 어떻게 하나요?")
    assert content_text("휴가를 가기 전에 무엇을 해야 하나요?") == "휴가를 가기 전에"
    assert content_text("useEffect와 useLayoutEffect의 차이는 무엇인가요?") == \
        "useEffect useLayoutEffect 차이는"
    assert content_text("컴포넌트 사이에 state를 공유하려면") == "컴포넌트 사이에 state 공유하려면"
    # Adverbs and pronouns that carry content stay ("아무것도 안": render nothing).
    assert content_text("화면에 아무것도 안 그리게 하려면 뭘 해야 돼요?") == "화면에 아무것도 안 그리게"
    # Words the dictionary reads as names ("해요", "싶어요") still only ask.
    assert content_text("파일을 압축하고 싶어요. 어떻게 해요?") == "파일을 압축하고"


def test_framing_words_are_dropped() -> None:
    assert content_text("How do I group results by the folder they come from?") == \
        "group results by the folder they"  # "they" goes in the analyzer (a stop word)


def test_a_korean_particle_gives_no_straddling_bigram() -> None:
    # '컴포넌트를' as written and the bare noun; not '트를' (nor '이에' of '사이에'), in
    # questions and pages alike (the analyzer gives morphemes, not syllable pairs).
    assert question_terms("컴포넌트를 사이에") == ["컴포넌트를", "컴포넌트", "사이에", "사이"]
    assert "트를" not in analyze("컴포넌트를")


def test_a_query_of_filler_words_only_keeps_them() -> None:
    assert question_terms("How do I") == analyze("How do I")
    assert question_terms("어떻게 하나요") == analyze("어떻게 하나요")


def test_identifiers_and_content_words_survive() -> None:
    assert content_text("when is ExportJob.rotateToken called?") == "is ExportJob.rotateToken called"
    assert content_text("REFUND_WINDOW_DAYS") == "REFUND_WINDOW_DAYS"


@dataclass
class FakePage:
    title: str
    path: str
    role: str = "topic"
    headings: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    line_count: int = 100
    frontmatter_json: str = "{}"
    summary: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)


def field_factor(page: FakePage, weights: dict[str, float], total: float,
                 asked: frozenset[str] = frozenset()) -> float:
    return _field_factor(page, keyed_terms(weights), total, asked)


@dataclass
class FakeHit:
    page: FakePage
    score: float


def _weights(text: str) -> dict[str, float]:
    return dict.fromkeys(analyze(text), 1.0)


def test_a_page_named_after_the_question_beats_one_that_mentions_it() -> None:
    weights = _weights("block embed")
    named = FakeHit(FakePage("Block embeds", "Block embeds.md"), 10.0)
    mentions = FakeHit(FakePage("Editing", "Editing.md", headings=("Links",)), 12.0)
    weigh_fields([named, mentions], weights)
    assert named.score > mentions.score
    assert mentions.score == 12.0  # no field holds a question term: the score stays


def test_headings_count_less_than_the_name() -> None:
    weights = _weights("line continuations")
    total = sum(weights.values())
    by_name = field_factor(FakePage("Line Continuations", "q.md"), weights, total)
    by_heading = field_factor(FakePage("Queries", "q.md", headings=("Line continuations",)),
                              weights, total)
    assert by_name > by_heading > 1.0


def test_aliases_and_file_name_are_part_of_the_name() -> None:
    weights = _weights("recurring")
    total = sum(weights.values())
    assert field_factor(FakePage("Repeat", "r.md", aliases=("Recurring",)), weights, total) > 1.0
    assert field_factor(FakePage("Repeat", "notes/recurring.md"), weights, total) > 1.0
    aliased = FakePage("Repeat", "r.md", frontmatter_json='{"aliases": ["Recurring tasks"]}')
    assert field_factor(aliased, weights, total) > 1.0
    # A folder names a group of pages, not this page.
    assert field_factor(FakePage("Repeat", "recurring/r.md"), weights, total) == 1.0


def test_hubs_are_lowered_unless_their_name_answers() -> None:
    hub = FakePage("Start here", "index.md", role="index")
    weights = _weights("publish website")
    total = sum(weights.values())
    assert is_hub(hub)
    assert field_factor(hub, weights, total) == HUB_FACTOR
    answering = FakePage("Publish website", "index.md", role="index")
    assert field_factor(answering, weights, total) > 1.0
    link_list = FakePage("Topics", "topics.md", links=tuple(f"p{i}" for i in range(12)), line_count=40)
    assert is_hub(link_list)
    assert not is_hub(FakePage("Grouping", "grouping.md", links=("a",) * 12, line_count=1000))
    assert is_hub(FakePage("FAQ", "docs/faq.md"))


def test_a_question_naming_the_page_gives_it_the_whole_name_credit() -> None:
    query = "What is DXF?"
    weights = dict.fromkeys(question_terms(query), 1.0)
    total = sum(weights.values())
    asked = asked_terms(query)
    named = field_factor(FakePage("What is DXF", "w.md"), weights, total, asked)
    longer = field_factor(FakePage("DXF Ground Truth", "g.md"), weights, total, asked)
    assert named > longer > 1.0


def test_a_lead_holding_the_question_counts() -> None:
    weights = _weights("verify files")
    hit = FakeHit(FakePage("git-commit-graph", "g.md", summary="Write and verify files."), 1.0)
    other = FakeHit(FakePage("git-commit-graph", "g.md", summary="Show the graph."), 1.0)
    weigh_fields([hit, other], weights, lead_of=lead_terms)
    assert hit.score > other.score == 1.0


def test_a_hub_stays_in_orientation_and_leaves_the_top_of_evidence(tmp_path: Path) -> None:
    # index.md mentions publishing everywhere; publishing.md is the page about it.
    (tmp_path / "index.md").write_text(
        "# Start here\n\nHow do I publish? How do I publish notes? How do I make a website?\n\n"
        + "".join(f"- [[topic {i}]]: how do I publish notes as a website, part {i}\n" for i in range(12)),
        encoding="utf-8")
    (tmp_path / "publishing.md").write_text(
        "# Publishing\n\nTurn a folder of notes into a static website with the publish command.\n"
        "\n## Website settings\n\nChoose a theme.\n" + "Other words about themes.\n" * 20,
        encoding="utf-8")
    for i in range(12):
        (tmp_path / f"topic {i}.md").write_text(f"# Topic {i}\n\nSomething else entirely, {i}.\n",
                                                encoding="utf-8")
    source = KnowledgeSource(ServeSettings(root=tmp_path, page_cache=False, inotify=False))
    try:
        pack = source.context(source.request(query="How do I publish my notes as a website?"))
    finally:
        source.close()
    assert [item["path"] for item in pack["orientation"]] == ["index.md"]
    assert pack["evidence"][0]["path"] == "publishing.md"



def test_a_question_names_a_page_whose_title_words_it_holds_in_another_form() -> None:
    # "group" holds "Grouping" (the same stem): the question names that page, not the one
    # whose title has a word the question lacks.
    query = "How do I group query results by the folder they come from?"
    weights = dict.fromkeys(question_terms(query), 1.0)
    total = sum(weights.values())
    asked = asked_terms(query)
    assert names_page("Grouping", asked) and not names_page("Custom Grouping", asked)
    assert not names_page("", asked) and not names_page("the", asked)  # no word: no name
    named = field_factor(FakePage("Grouping", "Grouping.md"), weights, total, asked)
    partly = field_factor(FakePage("Custom Grouping", "c.md"), weights, total, asked)
    assert named == 1.0 + NAME_WEIGHT
    assert 1.0 < partly < named


def test_a_dotted_hierarchy_names_the_page_by_its_last_part() -> None:
    # "handbook.company.values" sits under "company" as a file sits in a folder: the page is
    # "values", so a question about the company does not name it.
    total = sum(_weights("company").values())
    assert field_factor(FakePage("Values", "notes/handbook.company.values.md"),
                        _weights("company"), total) == 1.0
    assert field_factor(FakePage("Checklist", "notes/handbook.people.offboarding.md"),
                        _weights("offboarding"), total) > 1.0
    # A title or file name that merely has a dot in it is still read whole.
    assert field_factor(FakePage("Notes", "Release Notes v1.3.x.md"), _weights("release"),
                        total) > 1.0


def test_quantifiers_are_filler() -> None:
    assert content_text("Can I split a long query over several lines?") == "split a long query lines"
    assert content_text("Why do many tasks show few dates?") == "tasks show dates"


def test_identifier_parts_and_korean_particles_are_title_words() -> None:
    asked = asked_terms("What is DXF?")
    assert not names_page("DXF-Internals", asked)  # "internals" is not asked
    assert names_page("DXF", asked) and names_page("What is DXF?", asked)
    weights = dict.fromkeys(question_terms("What is DXF?"), 1.0)
    total = sum(weights.values())
    # Both are named; the longer name the question holds whole says more of it.
    assert field_factor(FakePage("What is DXF?", "w.md"), weights, total, asked) > \
        field_factor(FakePage("DXF", "d.md"), weights, total, asked)
    # A Korean title word is held without its particle: "Effect가" by "Effect를".
    assert names_page("Effect가 경우", asked_terms("Effect를 쓰는 경우"))
    assert not names_page("Effect가 필요하지 않은 경우", asked_terms("Effect를 쓰는 경우"))
