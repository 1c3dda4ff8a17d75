"""Word-pair signatures: a needle cut anywhere from a text never needs a bit its text lacks."""

from __future__ import annotations

import random

import numpy as np

from serve.retrieval.pairs import PairSignatures, needle_bits, signature

TEXTS = [
    "The release train is cut on Fridays; run publish.yml after REFUND_WINDOW_DAYS changes.",
    "3차 계약서를 검토했다. 배포 전에 변경 사항을 공유합니다 — 日本語のリリースノート v2版",
    "ExportJob.rotateToken() rotates the token; snake_case_name and camelCaseName too.",
    "a b c de fg hij klmn opqrs: short words, (parentheses), \"quotes\" and dashes -- here.",
]


def _set_bits(row: np.ndarray) -> set[int]:
    return set(np.flatnonzero(np.unpackbits(row, bitorder="little")).tolist())


def test_every_needle_cut_from_a_text_is_covered_by_its_signature() -> None:
    rng = random.Random(3)
    for text in TEXTS:
        folded = text.casefold()
        have = _set_bits(signature(folded))
        assert have
        for _ in range(400):
            start = rng.randrange(len(folded))
            needle = folded[start:start + rng.randint(1, 40)]
            assert set(needle_bits(needle)) <= have, needle


def test_needles_without_a_certain_pair_need_nothing() -> None:
    assert needle_bits("release") == []  # one word: no pair
    assert needle_bits("on fr") == []  # both edge words shorter than three bytes
    assert needle_bits("") == []
    assert needle_bits("cut on fridays")  # "on" is whole inside the needle


def test_a_page_without_the_pair_is_ruled_out() -> None:
    signatures = PairSignatures()
    signatures.extend([signature(t.casefold()) for t in TEXTS])
    assert signatures.count == len(TEXTS)
    found = signatures.matching(needle_bits("release train is cut"))
    assert found.tolist() == [True, False, False, False]
    assert signatures.matching([]).all()
    # Growing keeps earlier rows.
    signatures.extend([signature("release train")])
    assert signatures.matching(needle_bits("release train")).tolist() == [True, False, False, False, True]
