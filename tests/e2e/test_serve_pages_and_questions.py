"""What the installed `llmwiki-serve` makes of a page's Markdown (headings, links and tags from prose
only) and how it ranks a question asked in natural words: over HTTP, on a folder written here."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.e2e.hostile import SAMPLE_WIKI, call, post_json
from tests.e2e.processes import Service, start_serve, stop_checked

PAGE = """# Styling Guide

Colours are set with `color: #ccc` and `#ff0000`; tag this page #styling.
See [[Release Checklist]] and [the runbook](runbooks/rollback.md#steps).
Inline code is not a link: `[[Not A Link]]`, and `#nottag` is not a tag.
A priority is not a tag: [#A] task. Jump to [[#Usage]] on this page.

```python
# not a heading
x = "[[Fenced Link]]"  # and #fencedtag
```

## Usage

Text with a [link](https://example.org/page#fragment).
"""

# Numbers as a page writes them; the questions below write them another way.
LIMITS = """# Service Limits

A request may carry up to 100 KB of JSON. The model reads a context of 128,000 tokens.
Batch exports were added in release 2.0.0.
The learning budget is $1,500 a year. The widget works with React 17 and 18.
"""

# A Korean verb as the page conjugates it ("미룹니다"); the question conjugates it otherwise.
POSTPONE = """# 일정 연기

급하지 않은 일은 다음 주로 미룹니다.
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    work = tmp_path_factory.mktemp("pages")
    root = work / "wiki"
    shutil.copytree(SAMPLE_WIKI, root)
    (root / "styling-guide.md").write_text(PAGE, encoding="utf-8")
    (root / "service-limits.md").write_text(LIMITS, encoding="utf-8")
    (root / "postpone.md").write_text(POSTPONE, encoding="utf-8")
    service = start_serve(work / "run", root)
    yield service
    stop_checked(service)


def test_headings_links_and_tags_come_from_prose_only(served: Service) -> None:
    answer = call(served.url, "GET", "/read/styling-guide")
    assert answer.status == 200, answer.body[:300]
    page = answer.json()
    assert page["title"] == "Styling Guide"
    assert "Usage" in page["headings"] and "not a heading" not in page["headings"]
    assert "Release Checklist" in page["links"]
    assert not {"Not A Link", "Fenced Link"} & set(page["links"]), page["links"]
    assert "styling" in page["tags"]
    not_tags = {"ccc", "ff0000", "nottag", "fencedtag", "A", "Usage", "fragment"}
    assert not not_tags & set(page["tags"]), page["tags"]


@pytest.mark.parametrize(("question", "answer"), [
    ("How do I roll back a release?", "runbooks/rollback"),
    ("What is the process for rotating tokens?", "runbooks/token-rotation"),
    ("Which page explains semantic versioning?", "concepts/semantic-versioning"),
])
def test_a_natural_question_puts_the_answering_page_first_not_a_hub(
        served: Service, question: str, answer: str) -> None:
    reply = post_json(served.url, "/query", {"query": question})
    assert reply.status == 200, reply.body[:300]
    evidence = [item["page_id"] for item in reply.json()["evidence"]]
    assert evidence[0] == answer, evidence
    assert not {"index", "hot"} & set(evidence[:2]), evidence  # hubs stay out of the top


def test_a_question_of_filler_words_alone_still_searches(served: Service) -> None:
    reply = post_json(served.url, "/search", {"query": "how do I"})
    assert reply.status == 200 and reply.json()["results"], reply.body[:300]


@pytest.mark.parametrize("question", [
    "How large is the 128000-token context?",
    "Can a request carry 100000 bytes?",
    "Which version v2 added batch exports?",
])
def test_a_number_written_another_way_finds_its_page_and_answers(
        served: Service, question: str) -> None:
    reply = post_json(served.url, "/query", {"query": question})
    assert reply.status == 200, reply.body[:300]
    pack = reply.json()
    evidence = [item["page_id"] for item in pack["evidence"]]
    assert evidence[:1] == ["service-limits"], evidence
    assert pack["answerable"] is True, pack["limitations"]


@pytest.mark.parametrize("question", ["Is the learning budget $1.5k a year?",
                                      "Does the widget work with React v17?"])
def test_an_amount_and_a_major_version_written_otherwise_are_answerable(
        served: Service, question: str) -> None:
    # "$1.5k" is the page's "$1,500"; "v17" is its "React 17".
    reply = post_json(served.url, "/query", {"query": question})
    assert reply.status == 200, reply.body[:300]
    pack = reply.json()
    assert [item["page_id"] for item in pack["evidence"]][:1] == ["service-limits"]
    assert pack["answerable"] is True, pack["limitations"]


def test_korean_question_words_go_whatever_their_ending(served: Service) -> None:
    # "어떻게 해야 돼요" only asks: the pack names no missing term for it.
    reply = post_json(served.url, "/query", {"query": "급하지 않은 일은 어떻게 미뤄야 돼요?"})
    assert reply.status == 200, reply.body[:300]
    pack = reply.json()
    assert [item["page_id"] for item in pack["evidence"]][:1] == ["postpone"]
    assert pack["answerable"] is True, pack["limitations"]


def test_a_korean_question_meets_its_page_by_the_verb_stem(served: Service) -> None:
    # "미루려면" and "미룹니다" share no syllable pair: only their stem 미루 (mecab-ko).
    reply = post_json(served.url, "/search", {"query": "미루려면 어떻게 해요?"})
    assert reply.status == 200, reply.body[:300]
    ids = [item["page_id"] for item in reply.json()["results"]]
    assert ids[:1] == ["postpone"], ids
