"""The merged order across sources (bridge/core/fusion.py) and what follows it: the request
option, the prompt's digest and budget cut, and a hybrid follow-up search's numbering."""

from __future__ import annotations

import json

import pytest

from bridge.core.answer import _Evidence
from bridge.core.artifact import WireGraph
from bridge.core.fusion import TOP_WINDOW, Ranked, fuse, same_page
from bridge.core.prompt import evidence_bundle, fit_budget
from bridge.core.request import RunRequestError, parse_run_request
from common.bridge_schemas import Citation, CitationOrigin

QUERY = "How do I roll back a failed release?"


def cite(source: str, page: str, title: str = "", snippet: str = "", score: float | None = None,
         sha256: str | None = None) -> Citation:
    origin = CitationOrigin(path=f"{page}.md", line_start=1, line_end=2, sha256=sha256) if sha256 else None
    return Citation(id=f"{source}:{page}", source_id=source, page_id=page, title=title or page,
                    path=f"{page}.md", snippet=snippet, score=score, connection_id=source, origin=origin)


def noise(source: str, count: int) -> list[Citation]:
    return [cite(source, f"note-{n}", f"Note {n}", f"unrelated words about gardening in {source}")
            for n in range(count)]


def ids(citations: list[Citation]) -> list[str]:
    return [c.id for c in citations]


def test_one_source_comes_out_in_its_own_order() -> None:
    own = [cite("a", "intro", "Introduction", "welcome"), cite("a", "rollback", "Rollback a release",
                                                                "roll back a failed release")]
    assert ids(fuse(QUERY, [Ranked(own, True)])) == ["a:intro", "a:rollback"]


def test_the_answering_source_leads_whatever_its_place_in_the_selection() -> None:
    first = noise("first", 8)
    late = [cite("late", "rollback", "Rollback a failed release", "how to roll back a release", 3.0),
            *noise("late", 3)]
    fused = fuse(QUERY, [Ranked(first, True), Ranked(late, True)])
    assert fused[0].id == "late:rollback"
    assert sorted(ids(fused)) == sorted(ids(first) + ids(late))


def test_a_source_that_cannot_answer_follows_those_that_can() -> None:
    unable = [cite("unable", "rollback", "Rollback a failed release", "roll back a failed release")]
    able = [cite("able", "deploys", "Deploys", "release notes")]
    fused = fuse(QUERY, [Ranked(unable, False), Ranked(able, True)])
    assert ids(fused) == ["able:deploys", "unable:rollback"]


def test_one_sources_tail_cannot_push_anothers_best_out_of_the_top() -> None:
    crowded = [cite("crowd", f"release-{n}", f"Rollback release {n}", "roll back a failed release")
               for n in range(TOP_WINDOW + 5)]
    other = [cite("other", "faq", "Questions", "nothing in common")]
    fused = fuse(QUERY, [Ranked(crowded, True), Ranked(other, True)])
    assert "other:faq" in ids(fused[:TOP_WINDOW])
    assert ids(fused)[:TOP_WINDOW - 1] == ids(crowded)[:TOP_WINDOW - 1]


def test_the_same_page_from_two_sources_is_one_citation_naming_both() -> None:
    text = "roll back a failed release by redeploying the previous build"
    first = [cite("a", "rollback", "Rollback", text, 2.0)]
    second = [cite("b", "runbooks/rollback", "Rollback", text + " quickly", 9.0), cite("b", "other", "Other")]
    fused = fuse(QUERY, [Ranked(first, True), Ranked(second, True)])
    [merged] = [c for c in fused if c.also_in]
    assert [(a.id, a.source_id, a.page_id) for a in merged.also_in or ()] in (
        [("b:runbooks/rollback", "b", "runbooks/rollback")], [("a:rollback", "a", "rollback")])
    assert len(fused) == 2 and first[0].also_in is None and second[0].also_in is None  # not changed in place


def test_same_title_is_not_enough_to_be_the_same_page() -> None:
    assert not same_page(cite("a", "x", "Overview", "one thing entirely"),
                         cite("b", "x", "Overview", "something else again"))
    assert same_page(cite("a", "x", "Overview", "one", sha256="f" * 64), cite("b", "y", "Overview", "two",
                                                                            sha256="f" * 64))
    assert not same_page(cite("a", "x", "Overview", "same"), cite("a", "y", "Overview", "same"))


def test_citation_order_is_parsed_and_checked() -> None:
    assert parse_run_request({"query": "q"}).citation_order == "relevance"
    assert parse_run_request({"data": {"query": "q", "citationOrder": "source"}}).citation_order == "source"
    with pytest.raises(RunRequestError) as refused:
        parse_run_request({"query": "q", "citationOrder": "newest"})
    assert refused.value.code == "bad_request"
    assert refused.value.message == "citationOrder must be one of: relevance, source."


def test_the_digest_keeps_the_fused_order_and_the_budget_cuts_its_end() -> None:
    citations = [cite("late", "rollback", "Rollback", "x" * 400), *noise("first", 40)]
    for citation in citations[1:]:
        citation.snippet = "y" * 400
    bundle = evidence_bundle(QUERY, citations, [], [], WireGraph(), ranked=True)
    assert [d["id"] for d in bundle["citationDigest"]] == ids(citations[:8])
    sent = json.loads(fit_budget(bundle, 4000))
    kept = [c["id"] for c in sent["citations"]]
    assert kept[0] == "late:rollback" and kept == ids(citations[:len(kept)]) and len(kept) < len(citations)
    # the reference's digest re-ranks by word overlap with the question
    reference = evidence_bundle("Note 7", citations, [], [], WireGraph())
    assert reference["citationDigest"][0]["id"] == "first:note-7"


def test_a_follow_up_search_keeps_numbers_and_merges_a_page_already_cited() -> None:
    text = "roll back a failed release by redeploying the previous build"
    first = cite("a", "rollback", "Rollback", text)
    evidence = _Evidence([first, cite("a", "intro", "Intro")], [])
    found = [cite("b", "unrelated", "Gardening", "soil"), cite("b", "rollback", "Rollback", text),
             cite("b", "release", "Release a failed build", "roll back")]
    numbered = evidence.add_found(found, ranked=True)
    # the source's own order; the page the run already cites keeps its number and names b too
    assert [(n, c.id) for n, c in numbered] == [(3, "b:unrelated"), (1, "a:rollback"), (4, "b:release")]
    assert [a.id for a in evidence.citations[0].also_in or ()] == ["b:rollback"]
    assert first.also_in is None  # the source's own citation is not changed in place
    assert evidence.add(found[1]) == 1  # the merged page keeps its number when found again
    plain = _Evidence([cite("a", "intro", "Intro")], [])
    assert [n for n, _ in plain.add_found(found, ranked=False)] == [2, 3, 4]
