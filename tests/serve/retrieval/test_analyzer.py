"""The analyzer: English words, identifiers, numbers, Korean and CJK become search terms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from serve.retrieval import analyzer, korean
from serve.retrieval.analyzer import analyze, query_terms
from serve.retrieval.fields import heading_terms, name_terms, title_terms
from serve.retrieval.scoring import lead_terms
from serve.service import KnowledgeSource
from serve.settings import ServeSettings


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Stems, plus the word as written when it differs; trailing punctuation is dropped.
        ("before release.", ["befor", "before", "releas", "release"]),
        ("publish.yml", ["publish.yml", "publish", "yml"]),
        ("REFUND_WINDOW_DAYS", ["refund_window_days", "refund", "window", "day", "days"]),
        ("ExportJob.rotateToken", ["exportjob.rotatetoken", "exportjob", "export", "job",
                                   "rotatetoken", "rotat", "rotate", "token"]),
        ("snake_case", ["snake_case", "snake", "case"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        ("v1.2.3", ["v1.2.3", "v1", "v", "1", "2", "3"]),
        ("2026-07-10", ["2026-07-10", "2026", "07", "10"]),
        ("studies", ["studi", "studies"]),
        ("the and of", []),  # stopwords carry no meaning on their own
    ],
)
def test_english_and_identifiers(text: str, expected: list[str]) -> None:
    assert analyze(text) == expected


def test_korean_words_by_their_morphemes_not_syllable_pairs() -> None:
    terms = analyze("3차 계약서를")
    assert {"3차", "3", "차", "계약서를", "계약서", "계약"} <= set(terms)
    assert "약서" not in terms  # a syllable pair across morphemes matches unrelated words


@pytest.mark.parametrize(("word", "wanted"), [
    ("동기화하려면", {"동기", "동기화"}),  # a noun, its suffix, endings
    ("써요", {"쓰"}),  # an inflected verb's stem
    ("명령어를", {"명령어", "명령"}),  # a compound noun and its parts
    ("컴포넌트에서는", {"컴포넌트"}),
])
def test_korean_stems_nouns_and_compounds(word: str, wanted: set[str]) -> None:
    terms = analyze(word)
    assert terms[0] == word and wanted <= set(terms), terms
    assert not {"려면", "에서는", "를", "요"} & set(terms), terms  # endings and particles


@pytest.mark.parametrize(
    ("text", "expected"),
    [("日本語", ["日本", "本語"]), ("部署说明", ["部署", "署说", "说明"]), ("中", ["中"])],
)
def test_chinese_and_japanese_become_bigrams(text: str, expected: list[str]) -> None:
    assert analyze(text) == expected


def test_full_width_forms_are_normalised() -> None:
    assert analyze("ＡＢＣ１２３") == analyze("ABC123")


def test_query_terms_are_distinct_in_order() -> None:
    assert query_terms("release the release notes") == ["releas", "release", "note", "notes"]


def test_control_characters_and_symbols_only_give_no_terms() -> None:
    assert analyze("\x00\x07 --- !!! ???") == []


def test_stemming_from_several_threads_at_once_gives_each_word_its_own_stem() -> None:
    """Searches and index updates run on the loop and in worker threads; a stemmer shared between
    them mixed up (or crashed on) the words they stemmed at the same moment."""
    import threading

    from serve.retrieval.analyzer import stem

    words = [f"{root}{suffix}" for root in ("connect", "deploy", "roll", "release", "index", "walk")
             for suffix in ("", "ing", "ed", "ions", "ers", "ingly", "ational")]
    expected = {word: stem.__wrapped__(word) for word in words}
    wrong: list[str] = []

    def work() -> None:
        for _ in range(300):
            for word in words:
                if stem.__wrapped__(word) != expected[word]:
                    wrong.append(word)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_without_morphology_a_korean_word_gives_only_itself() -> None:
    text = "배포 체크리스트를 확인하려면 release notes"
    assert analyze(text, morphology=False) == ["배포", "체크리스트를", "확인하려면", "releas",
                                               "release", "note", "notes"]
    # Every term a question with no Korean in it can match, in the same order around it.
    latin = [t for t in analyze(text) if t.isascii()]
    assert [t for t in analyze(text, morphology=False) if t.isascii()] == latin


def test_a_question_with_no_korean_in_it_never_asks_the_korean_analyzer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart maps the index from the store: then only a question's hits' fields are
    analysed, and for an English question without Korean morphemes (no Korean morpheme can
    match it), so the analyzer and its 50 MB dictionary are not loaded for it."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "index.md").write_text("# 배포 안내\n\n배포 절차를 설명합니다. release steps.\n")
    (root / "release.md").write_text("# Release 체크리스트\n\n## 서명 확인\n\nsign the release steps\n")
    source = KnowledgeSource(ServeSettings(root=root, page_cache=False))
    source.warm()  # the index (built here from the pages, which analyses their Korean)
    analyzer._TERMS_CACHE.clear()  # as after a restart, whose index is read, not built
    for cached in (lead_terms, name_terms, heading_terms, title_terms, korean.parse):
        cached.cache_clear()
    asked: list[str] = []
    real = korean._tagger

    def tagger() -> Any:
        asked.append("parse")
        return real()

    monkeypatch.setattr(korean, "_tagger", tagger)
    assert source.search(source.request(query="release steps")).results
    assert asked == []
    assert source.search(source.request(query="배포 절차")).results
    assert asked
    source.close()


def test_a_korean_word_is_parsed_once_for_its_stems_terms_and_nouns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A question's Korean word is read for its stems (question words), its terms (the
    analyzer) and its nouns (answerable): one parse serves all three."""
    parses: list[str] = []
    tagger = korean._tagger()

    class Counting:
        def parse(self, word: str) -> object:
            parses.append(word)
            return tagger.parse(word)

    korean.parse.cache_clear()
    monkeypatch.setattr(korean, "_tagger", Counting)
    word = "구글캘린더랑동기화하려면"
    found = (korean.stems(word), korean.word_terms(word), korean.nouns(word))
    assert parses == [word]
    assert "구글" in found[2] and "동기" in found[1] and found[0]
    korean.parse.cache_clear()
