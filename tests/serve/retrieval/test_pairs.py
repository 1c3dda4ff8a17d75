"""Word-pair signatures: a needle cut anywhere from a text never needs a bit its text lacks."""

from __future__ import annotations

import random

import numpy as np
import pytest

from serve.retrieval.pairs import (
    REORDER_RUNS,
    SIGNATURE_BYTES,
    PairSignatures,
    needle_bits,
    signature,
    signature_columns,
    signatures,
)

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
    assert needle_bits("a b") == []  # both edge words shorter than two bytes
    assert needle_bits("on fr")  # short keys: two bytes a side are enough
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


def test_filters_added_in_blocks_of_any_size_test_as_added_one_by_one() -> None:
    rng = random.Random(8)
    words = ["release", "train", "is", "cut", "on", "fridays", "run", "publish", "yml", "after",
             "refund", "window", "days"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 12))) for _ in range(2600)]
    rows = [signature(text) for text in texts]
    one_by_one, in_blocks = PairSignatures(), PairSignatures()
    for row in rows:
        one_by_one.extend([row])
    done = 0
    for size in (3, 1030, 5, 1, 17, 1200, 8, 336):  # unaligned starts, chunks and tails
        in_blocks.extend(np.array(rows[done:done + size]))
        done += size
    assert done == len(rows) == in_blocks.count == one_by_one.count
    for needle in ("release train", "cut on", "on fridays", "publish yml after", "days run"):
        bits = needle_bits(needle)
        expected = [set(np.flatnonzero(np.unpackbits(row, bitorder="little")).tolist()) >= set(bits)
                    for row in rows]
        assert in_blocks.matching(bits).tolist() == expected == one_by_one.matching(bits).tolist()


def test_signature_columns_are_the_rows_bit_by_bit_and_append_only_at_a_byte_boundary() -> None:
    texts = ["release train notes", "no payout today", "publish.yml steps", "x", "is on"] * 3
    by_columns = PairSignatures()
    by_columns.extend_columns(signature_columns(texts[:8]), 8)
    by_columns.extend_columns(signature_columns(texts[8:]), len(texts) - 8)
    by_rows = PairSignatures()
    by_rows.extend(signatures(texts))
    for needle in ("release train", "no payout", "is on", "publish.yml steps", "train notes x"):
        bits = needle_bits(needle)
        assert np.array_equal(by_columns.matching(bits), by_rows.matching(bits)), needle
    with pytest.raises(ValueError):  # 15 documents so far: the next would start inside a byte
        by_columns.extend_columns(signature_columns(texts[:2]), 2)
    with pytest.raises(ValueError):
        PairSignatures().extend_columns(signature_columns(texts[:3]), 9)  # columns of 3, not 9


def test_filters_over_a_base_never_written_test_as_one_array_does() -> None:
    """The first documents' filters may be an array the signatures never write (the store's
    file, mapped); the documents added after them test as if all were in one array."""
    texts = ["release train notes", "no payout today", "publish.yml steps", "x", "is on",
             "cut on fridays", "refund window days", "train is late", "release train again",
             "no payout yet", "is on time"]
    first, later = texts[:9], texts[9:]  # 9: the later documents start inside a byte
    base = signature_columns(first)
    base.flags.writeable = False  # a write would raise
    over = PairSignatures(base, len(first))
    assert over.count == len(first) and over.packed() is base
    over.extend(signatures(later[:1]))
    over.extend([signature(later[1])])
    whole = PairSignatures()
    whole.extend(signatures(texts))
    assert over.count == whole.count == len(texts)
    assert np.array_equal(over.packed(), whole.packed())
    for needle in ("release train", "no payout", "is on", "publish.yml steps", "train again"):
        bits = needle_bits(needle)
        assert np.array_equal(over.matching(bits), whole.matching(bits)), needle
    with pytest.raises(ValueError):  # columns of 9 documents are not those of 17
        PairSignatures(base, 17)


@pytest.mark.parametrize("changes", [0, 3, 40, 400])  # runs copied as bytes; past 256, bit by bit
def test_filters_reordered_are_the_rows_in_the_order_asked(changes: int) -> None:
    """A base (never written) and documents added after it, reordered as compaction asks: most
    kept in order with some gone and the added ones placed among them, or shuffled."""
    rng = np.random.default_rng(changes)
    rows = rng.integers(0, 256, size=(1203, SIGNATURE_BYTES), dtype=np.uint8)
    base = PairSignatures()
    base.extend(rows[:1001])
    filters = PairSignatures(base.packed(), 1001)
    filters.extend(rows[1001:])
    order = [doc for doc in range(1001) if rng.random() > changes / 1000]
    added = np.array_split(np.arange(1001, len(rows)), max(1, changes))
    for group in added:  # the added documents in runs placed among the kept
        at = int(rng.integers(0, len(order) + 1)) if changes else len(order)
        order[at:at] = group.tolist()
    if changes == 400:
        rng.shuffle(order)
    assert (len(filters._runs(np.array(order))) > REORDER_RUNS) == (changes == 400)
    packed = filters.reordered(np.array(order))
    expected = np.packbits(np.unpackbits(rows[order], axis=1, bitorder="little").T, axis=1,
                           bitorder="little")
    assert np.array_equal(packed, expected)
