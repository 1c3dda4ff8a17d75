"""Prose scanning: the linear scans agree with the patterns they replace, code and HTML are
not prose, and no 1 MB page of one repeated construct parses much slower than plain text."""

from __future__ import annotations

import random
import re
import time

import pytest

from serve.source import prose
from serve.source.page import ParseOptions
from serve.source.parse import parse_page
from tests.support.adversarial import ADVERSARIAL, MB, plain_page

# The patterns the scans replace (quadratic on runs of '['): the scans must match them.
WIKILINK_RE = re.compile(r"\[\[([^\]]*)\]\]")
MDLINK_RE = re.compile(r"\[([^\]]+)\]\(([^)]+?\.(?:md|org)(?:#[^)]*)?)\)")
ALPHABET = ["[", "]", "(", ")", "[[", "]]", "](", ".md", ".org", "#", "x", " ", "\n", "|", "`"]


def random_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randrange(1, 40))) for _ in range(count)]


@pytest.mark.parametrize("seed", range(4))
def test_wikilink_scan_equals_the_pattern(seed: int) -> None:
    for text in random_texts(3000, seed):
        assert [m.span() for m in WIKILINK_RE.finditer(text)] == list(prose.wikilink_spans(text)), text


@pytest.mark.parametrize("seed", range(4))
def test_markdown_link_scan_equals_the_pattern(seed: int) -> None:
    for text in random_texts(3000, seed):
        assert [m.group(2) for m in MDLINK_RE.finditer(text)] == prose.markdown_link_targets(text), text


@pytest.mark.parametrize("seed", range(3))
def test_single_backtick_fast_path_pairs_runs_as_the_general_scan(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(2000):
        pieces = ["`", "a", " ", "\n", "\n\n", "\n \n"]
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
        if "``" in text:
            continue
        general = prose.code_span_spans(text + "\n\n``")  # a double run: the general scan
        assert prose.code_span_spans(text) == [s for s in general if s[1] <= len(text)], repr(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("`a` b `c`", [(0, 3), (6, 9)]),
        ("``a ` b`` c", [(0, 9)]),
        ("`a\n\nb` c", []),  # a span does not cross a paragraph break
        ("``x` y", []),
    ],
)
def test_code_spans(text: str, expected: list[tuple[int, int]]) -> None:
    assert prose.code_span_spans(text) == expected


def test_fences_open_in_bullets_and_close_only_on_a_bare_fence_line() -> None:
    body = "- a\n  ```py\n  x = 1 ```\n  ```\nafter\n~~~~\n~~~\n~~~~\ntail"
    spans = prose.fence_spans(body)
    assert [body[a:b] for a, b in spans] == ["  ```py\n  x = 1 ```\n  ```", "~~~~\n~~~\n~~~~"]


def test_prose_drops_code_and_html_but_keeps_text() -> None:
    body = "keep `code` <b>bold</b>\n```\nfenced\n```\n<!-- c --><style>x{}</style> end"
    assert prose.prose(body).split() == ["keep", "bold", "end"]


def parse_seconds(text: str) -> float:
    start = time.perf_counter()
    parse_page(text, "big.md", ParseOptions())
    return time.perf_counter() - start


@pytest.mark.timeout(300)
def test_adversarial_pages_parse_in_time_linear_in_their_size() -> None:
    plain = plain_page(MB)
    baseline = min(parse_seconds(plain) for _ in range(3))
    # A quadratic scan takes minutes on any of these; a linear one a few times the baseline.
    slow = {name: round(seconds / baseline, 1) for name, make in ADVERSARIAL.items()
            if (seconds := parse_seconds(make(MB))) > 10 * baseline + 0.05}
    assert not slow, f"slower than 10x a plain 1 MB page ({baseline:.2f} s): {slow}"
