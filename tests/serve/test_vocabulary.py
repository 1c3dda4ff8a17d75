"""A restored index's vocabulary (serve/retrieval/vocabulary.py) is the dict a fresh build
has: the same ids, the same order forwards and backwards, and terms added after it."""

from __future__ import annotations

import random

import pytest

from serve.retrieval.term_finder import TermFinder
from serve.retrieval.vocabulary import Vocabulary
from serve.support import string_table
from serve.support.string_table import StringTable, table_arrays


def words(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "abcdeéü배포서명_-0123456789"
    found = dict.fromkeys("".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 9)))
                          for _ in range(n))
    return list(found)


def vocabulary(terms: list[str]) -> Vocabulary:
    return Vocabulary(StringTable(table_arrays(terms, "term_"), "term_"))


@pytest.mark.parametrize("shared_hashes", [False, True])
def test_a_vocabulary_answers_as_the_dict_of_its_terms(monkeypatch: pytest.MonkeyPatch,
                                                        shared_hashes: bool) -> None:
    if shared_hashes:
        monkeypatch.setattr(string_table, "hash_of", lambda raw: raw[0] % 5 if raw else 0)
    terms = words(1, 400)
    vocab, expected = vocabulary(terms[:300]), dict(zip(terms[:300], range(300), strict=True))
    for term in terms[300:]:  # as edits add them
        assert vocab.get(term) is None and term not in vocab
        expected[term] = vocab[term] = len(vocab)
    n = len(terms)
    assert vocab.setdefault(terms[5], 99) == 5 and vocab.setdefault("zz-new", len(vocab)) == n
    expected["zz-new"] = n
    assert list(vocab) == list(expected) and list(reversed(vocab)) == list(reversed(expected))
    assert len(vocab) == len(expected) and all(vocab[t] == i for t, i in expected.items())
    with pytest.raises(KeyError):
        vocab["not a term"]
    with pytest.raises(ValueError):
        vocab["another"] = 7  # not the next id
    with pytest.raises(ValueError):
        vocab[terms[0]] = len(vocab)  # not a new term


def test_the_term_finder_reads_a_vocabulary_as_a_dict() -> None:
    terms = words(2, 300)
    vocab, plain = vocabulary(terms), dict(zip(terms, range(len(terms)), strict=True))
    finder, plain_finder = TermFinder(), TermFinder()
    for word in ("a", "배포", "0", "é"):
        assert finder.containing(vocab, word) == plain_finder.containing(plain, word)
    vocab["배포서명xyz"] = plain["배포서명xyz"] = len(plain)
    assert finder.containing(vocab, "xyz") == plain_finder.containing(plain, "xyz")
