"""Numbers in one normal form (serve/retrieval/numbers.py): each spelling of the same number
meets the others at index and query time, and `answerable` reads them the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve.retrieval import numbers
from serve.retrieval.analyzer import analyze
from serve.retrieval.answerable import judge
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from tests.serve.retrieval.test_answerable import lookup

# (as a page writes it, as a question writes it): the two must share the number's normal form.
SAME_NUMBER = [
    ("a context window of 128,000 tokens", "128000-token context"),
    ("a 128K context window", "128000 token window"),
    ("1,000,000 rows", "1000000 rows"),
    ("uploads up to 100 KB", "100000 byte upload"),
    ("uploads up to 100KB", "100 kb upload"),
    ("a 100 kB limit", "100000 byte upload"),
    ("4 KiB pages", "4096 bytes"),
    ("a 2GiB cache", "2147483648 bytes"),
    ("1.5M downloads", "1500000 downloads"),
    ("since Tasks 2.0.0", "tasks v2.0"),
    ("since version 2", "v2 of tasks"),
    ("React 버전 18", "React v18.0"),
    ("3만 원", "30000원"),
    ("at 14:00 UTC", "the 1400 UTC meeting"),
]
# A duration's unit in any spelling: the number is shared as written, the unit by its name.
SAME_DURATION = [("flushes every 500ms", "500밀리초마다"), ("waits 10 seconds", "a 10s wait"),
                 ("after 5 hrs", "5 hours later")]


@pytest.mark.parametrize(("page", "question"), SAME_DURATION)
def test_each_spelling_of_a_duration_meets_the_others(page: str, question: str) -> None:
    units = {"millisecond", "second", "hour"}
    assert set(analyze(page)) & set(analyze(question)) & units, (analyze(page), analyze(question))


def normal_forms(text: str) -> set[str]:
    return {t for t in analyze(text) if t[:1].isdigit() or (t[:1] == "v" and t[1:2].isdigit())}


@pytest.mark.parametrize(("page", "question"), SAME_NUMBER)
def test_each_spelling_meets_the_others(page: str, question: str) -> None:
    shared = normal_forms(page) & normal_forms(question)
    assert any(len(t) > 1 for t in shared), (analyze(page), analyze(question))


@pytest.mark.parametrize(("text", "forms"), [
    ("128K", {"128000"}), ("128k", {"128000"}), ("1.5M", {"1500000"}),
    ("100KB", {"100000", "byte"}), ("4KiB", {"4096", "byte"}), ("v2.0", {"v2"}),
    ("2.0.0", {"v2"}), ("3.10", {"v3.10", "3.1"}), ("1.2.3", {"v1.2.3"}),
])
def test_word_forms(text: str, forms: set[str]) -> None:
    assert set(numbers.number_forms(text)) >= forms


@pytest.mark.parametrize("text", [
    "1,2,3",  # a list, not thousands
    "timeout 5m",  # minutes: lower-case m is no million
    "k8s", "sha256", "ab12cd",
])
def test_what_is_not_a_scaled_number(text: str) -> None:
    assert not any(len(t) >= 4 and t.isdigit() for t in analyze(text)
                   if t not in text.replace(",", " ").split()), analyze(text)


def test_thousands_separators_only_in_groups_of_three() -> None:
    assert numbers.ungroup("128,000 and 1,2,3 and 12,34 and 1,234.5") == \
        "128000 and 1,2,3 and 12,34 and 1234.5"


def test_an_overlong_number_is_left_as_written() -> None:
    digits = "9" * 40 + "K"
    assert numbers.word_forms(digits) == ()


def test_answerable_reads_a_number_identifier_by_its_normal_form() -> None:
    # The page says "128,000 tokens": its index holds 128000 and token.
    question = "What is the 128000-token limit?"
    found = judge(question, lookup("limit", evidence=("128000", "token", "limit")))
    assert found.answerable, found
    missing = judge(question, lookup("limit", evidence=("64000", "token", "limit")))
    assert not missing.answerable and "128000-token" in missing.missing
    # A version: the page says 2.0.0, the question v2.0.
    assert judge("changes in v2.0", lookup("chang", evidence=("v2", "chang"))).answerable


def test_a_page_is_found_and_answers_by_another_spelling(tmp_path: Path) -> None:
    (tmp_path / "limits.md").write_text(
        "# Limits\n\nThe model reads a context of 128,000 tokens; uploads may be 100 KB.\n",
        encoding="utf-8")
    (tmp_path / "other.md").write_text("# Other\n\nA page about tokens in general.\n",
                                       encoding="utf-8")
    source = KnowledgeSource(ServeSettings(root=tmp_path, page_cache=False, inotify=False))
    try:
        for question in ("What is the 128000-token limit?", "Can I upload 100000 bytes?"):
            pack = source.context(source.request(query=question))
            ids = [e["page_id"] for e in pack["evidence"]]
            assert ids[:1] == ["limits"], (question, ids)
            assert pack["answerable"] is True, (question, pack["limitations"])
    finally:
        source.close()
