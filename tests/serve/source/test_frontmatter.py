"""Frontmatter splitting (contract 1.4.1), JSON-safe values and the caller's decoding."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
import yaml

from serve.source.frontmatter import (
    MAX_FRONTMATTER_CHARS,
    MAX_FRONTMATTER_VALUES,
    json_safe,
    split_frontmatter,
)
from serve.watch.file_read import decode_text
from tests.support.folders import FIXTURES

# -- the split rule ------------------------------------------------------------------


def test_block_at_start_is_parsed_and_body_follows_it() -> None:
    split = split_frontmatter("---\ntitle: Hello\nn: 3\n---\n# Body\n")
    assert split.data == {"title": "Hello", "n": 3}
    assert split.body == "\n# Body\n"
    assert split.broken is False


@pytest.mark.parametrize(
    "text",
    [
        " ---\ntitle: A\n---\nbody",  # leading space
        "--- \ntitle: A\n---\nbody",  # trailing space on the opening line
        "----\ntitle: A\n---\nbody",  # four dashes
        "\n---\ntitle: A\n---\nbody",  # blank first line
        "---title: A\n---\nbody",  # no newline after the opening marker
        "---\r\ntitle: A\r\n---\r\nbody",  # raw CRLF (decode_text normalises it first)
    ],
)
def test_block_needs_exact_opening_marker(text: str) -> None:
    split = split_frontmatter(text)
    assert split.data == {}
    assert split.body == text
    assert split.body_line == 1
    assert split.broken is False


def test_first_newline_dashes_close_the_block_even_mid_line() -> None:
    split = split_frontmatter("---\ntitle: A\n---rest of closing line\nbody")
    assert split.data == {"title": "A"}
    assert split.body == "rest of closing line\nbody"


def test_a_longer_dash_run_closes_and_leaves_its_tail_in_the_body() -> None:
    split = split_frontmatter("---\ntitle: A\n-----\nbody")
    assert split.data == {"title": "A"}
    assert split.body == "--\nbody"


def test_only_the_first_closing_marker_counts() -> None:
    split = split_frontmatter("---\ntitle: A\n---\nmiddle\n---\nlast")
    assert split.data == {"title": "A"}
    assert split.body == "\nmiddle\n---\nlast"


def test_unclosed_block_means_no_frontmatter() -> None:
    text = "---\ntitle: Never Closed\n\n# Heading\n"
    split = split_frontmatter(text)
    assert split.data == {}
    assert split.body == text
    assert split.broken is False


def test_opening_dashes_alone_are_not_a_block() -> None:
    # '\n---' is searched from position 4, so '---\n---' has no closing marker.
    text = "---\n---\nbody"
    split = split_frontmatter(text)
    assert split.data == {}
    assert split.body == text


def test_empty_block_gives_empty_mapping_and_body_after_it() -> None:
    split = split_frontmatter("---\n\n---\nbody")
    assert split.data == {}
    assert split.body == "\nbody"
    assert split.broken is False


def test_invalid_yaml_keeps_the_whole_text_as_body_and_is_broken() -> None:
    text = "---\ntitle: [unclosed\ntags: nope\n---\n# Heading\n"
    split = split_frontmatter(text)
    assert split.data == {}
    assert split.body == text
    assert split.body_line == 1
    assert split.broken is True


@pytest.mark.parametrize(
    ("block", "body"),
    [
        ("- first\n- second", "\n# After\n"),
        ("just a scalar", "\n# After\n"),
        ("42", "\n# After\n"),
    ],
)
def test_non_mapping_yaml_gives_empty_mapping_and_body_after_block(block: str, body: str) -> None:
    split = split_frontmatter(f"---\n{block}\n---{body}")
    assert split.data == {}
    assert split.body == body
    assert split.broken is False


def test_body_line_is_the_closing_marker_line() -> None:
    # The body starts with the remainder of the closing '---' line (line 4 here).
    split = split_frontmatter("---\na: 1\nb: 2\n---\n# H\n")
    assert split.body_line == 4
    assert split.body.split("\n")[1] == "# H"


def test_body_line_for_non_mapping_block() -> None:
    split = split_frontmatter("---\n- a\n- b\n- c\n---\nx")
    assert split.body_line == 5


# -- YAML 1.1 values -----------------------------------------------------------------


def test_yaml_11_booleans() -> None:
    text = "---\na: yes\nb: no\nc: on\nd: off\ne: True\nf: 'yes'\ng: y\n---\n"
    data = split_frontmatter(text).data
    assert data == {"a": True, "b": False, "c": True, "d": False, "e": True, "f": "yes", "g": "y"}


def test_unquoted_dates_become_date_objects() -> None:
    text = "---\nday: 2026-07-10\nwhen: 2026-07-10T10:00:00\nquoted: '2026-07-10'\n---\n"
    data = split_frontmatter(text).data
    assert data["day"] == dt.date(2026, 7, 10)
    assert data["when"] == dt.datetime(2026, 7, 10, 10, 0, 0)
    assert data["quoted"] == "2026-07-10"


def test_json_safe_dates_and_datetimes_are_iso_strings() -> None:
    data = split_frontmatter(
        "---\nday: 2026-07-10\nwhen: 2026-01-02 10:00:00\nlist: [2026-08-01, x]\n"
        "nested: {d: 2026-09-09}\n---\n"
    ).data
    safe = json_safe(data)
    assert safe == {
        "day": "2026-07-10",
        "when": "2026-01-02T10:00:00",
        "list": ["2026-08-01", "x"],
        "nested": {"d": "2026-09-09"},
    }
    json.dumps(safe, allow_nan=False)


def test_json_safe_stringifies_keys_and_non_finite_floats() -> None:
    value: dict[Any, Any] = {
        1: "one",
        False: "no",
        None: "nothing",
        dt.date(2026, 1, 1): "new year",
        "inf": float("inf"),
        "nan": float("nan"),
        "ok": 1.5,
        "time": dt.time(1, 2, 3),
        "set": (1, 2),
    }
    safe = json_safe(value)
    assert safe["1"] == "one"
    assert safe["false"] == "no"
    assert safe["null"] == "nothing"
    assert safe["2026-01-01"] == "new year"
    assert safe["inf"] == "inf"
    assert safe["nan"] == "nan"
    assert safe["ok"] == 1.5
    assert safe["time"] == "01:02:03"
    assert safe["set"] == [1, 2]
    json.dumps(safe, allow_nan=False)


# -- hostile frontmatter -------------------------------------------------------------


def _billion_laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghijk"[: levels - 1]:
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    return "---\n" + "\n".join(lines) + "\n---\n# Body\n"


@pytest.mark.timeout(10)
def test_alias_bomb_is_reported_broken() -> None:
    text = _billion_laughs()
    split = split_frontmatter(text)
    assert split.broken is True
    assert split.data == {}
    assert split.body == text


@pytest.mark.timeout(10)
def test_self_referencing_alias_is_reported_broken() -> None:
    split = split_frontmatter("---\na: &a [*a]\n---\nx")
    assert split.broken is True
    assert split.data == {}


def test_too_many_values_are_broken_but_many_keys_are_fine() -> None:
    many_keys = "---\n" + "\n".join(f"k{i}: v" for i in range(5000)) + "\n---\nx"
    ok = split_frontmatter(many_keys)
    assert ok.broken is False
    assert len(ok.data) == 5000
    huge_list = "---\nk: [" + ",".join("1" for _ in range(25_000)) + "]\n---\nx"
    assert split_frontmatter(huge_list).broken is True


def test_oversized_block_is_broken() -> None:
    block = "k: " + "x" * (MAX_FRONTMATTER_CHARS + 10)
    text = f"---\n{block}\n---\nbody"
    split = split_frontmatter(text)
    assert split.broken is True
    assert split.body == text


# -- decoding done by the caller (serve.watch.file_read.decode_text) --------------------------


def test_decode_normalises_crlf_so_crlf_frontmatter_parses() -> None:
    text, problem = decode_text(b"---\r\ntitle: CRLF Page\r\ntags:\r\n  - windows\r\n---\r\n# H\r\n")
    assert problem == ""
    assert "\r" not in text
    split = split_frontmatter(text)
    assert split.data == {"title": "CRLF Page", "tags": ["windows"]}
    assert split.body == "\n# H\n"


def test_decode_turns_lone_cr_into_newline() -> None:
    text, _ = decode_text(b"a\rb\r\nc\n")
    assert text == "a\nb\nc\n"


def test_decode_strips_utf8_bom_so_frontmatter_still_parses() -> None:
    text, problem = decode_text(b"\xef\xbb\xbf---\ntitle: Bom\n---\nbody")
    assert problem == ""
    assert text.startswith("---\n")
    assert split_frontmatter(text).data == {"title": "Bom"}


def test_decode_replaces_invalid_utf8_and_reports_it() -> None:
    text, problem = decode_text(b"# Caf\xe9\n")
    assert problem == "not_utf8"
    assert text == "# Caf\ufffd\n"


def test_decode_of_valid_utf8_reports_nothing() -> None:
    text, problem = decode_text("# 태그 日本\n".encode())
    assert (text, problem) == ("# 태그 日本\n", "")


# -- values as the YAML loader gives them (contract: "parsed with YAML safe-load") --------


def _contract_split(text: str) -> tuple[Any, str]:
    """Contract 1.4.1 spelled out with the YAML loader itself."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---", 4)
    if end < 0:
        return {}, text
    try:
        value = yaml.load(text[4:end], Loader=yaml.CSafeLoader)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, ValueError):  # ValueError: an impossible date such as 2026-02-30
        return {}, text
    if not isinstance(value, dict):
        return {}, text[end + 4 :]
    return value, text[end + 4 :]


def _typed(value: Any) -> Any:
    """Equality that tells True from 1 and a date from a datetime."""
    if isinstance(value, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    return (type(value).__name__, value)


def _assert_agrees(text: str) -> None:
    split = split_frontmatter(text)
    data, body = _contract_split(text)
    assert (_typed(split.data), split.body) == (_typed(data), body)


AGREEING_BLOCKS = [
    "title: Plain Title\nreview_state: approved",
    "tags: [a, b, c]\nn: 3\nneg: -5\nplus: +12",
    "tags:\n  - one\n  - two\ntitle: T",
    "tags:\n- one\n- two",
    "empty:\nnext: 1",
    "last:",
    "flag: yes\noff_flag: Off\nnothing: ~\nnull_word: NULL",
    "day: 2026-07-10\nlist: [2026-07-10, 1, yes]",
    "quoted: 'a # not comment'\ndq: \"x: y\"",
    "url: https://example.com/a#frag\npath: /abs/path",
    "octal: 012\nfloat: 1.5\nsexagesimal: 12:30\nunderscore: 1_000",
    "yEs: 1\ny: n\nTrue: x",
    "k: [a:b]\nz: [ ]",
    "k: 가나\nlist: [가, 나]",
    "title: Hello  World\nother: a'b",
    "k: x\n  - continuation",
    "k:\n  -x",
    "k: 'unterminated",
    "k: 2026-02-30",
    "a: 1\na: 2",
    "k:\n  - 2026-07-10\n  - ~",
    "k: [a, 'b, c']",
    "dendron_updated: 1783072800000",
]


@pytest.mark.parametrize("block", AGREEING_BLOCKS)
def test_frontmatter_values_agree_with_the_yaml_loader(block: str) -> None:
    _assert_agrees(f"---\n{block}\n---\n# Body\n")


def _fixture_texts() -> list[Any]:
    params = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.suffix.lower() in (".md", ".org") and path.is_file() and not path.is_symlink():
            text, _ = decode_text(path.read_bytes())
            params.append(pytest.param(text, id=path.relative_to(FIXTURES).as_posix()))
    return params


@pytest.mark.parametrize("text", _fixture_texts())
def test_every_fixture_frontmatter_agrees_with_the_yaml_loader(text: str) -> None:
    _assert_agrees(text)


@pytest.mark.parametrize("block", ["tags:\n  - a\n- b", "tags:\n  - a\n - b"])
def test_inconsistently_indented_list_is_invalid_yaml(block: str) -> None:
    text = f"---\n{block}\n---\n# Body\n"
    split = split_frontmatter(text)
    assert split.broken is True
    assert split.data == {}
    assert split.body == text


@pytest.mark.parametrize("block", ["tags:\n- a\n  - b", "tags:\n - a\n  - b"])
def test_more_indented_dash_line_continues_the_previous_item(block: str) -> None:
    assert split_frontmatter(f"---\n{block}\n---\n").data == {"tags": ["a - b"]}


@pytest.mark.parametrize("value", ["a\x07b", "a\x00b", "a\x85b", "a\u2028b"])
def test_characters_yaml_rejects_make_the_block_broken(value: str) -> None:
    text = f"---\ntitle: {value}\n---\n# Body\n"
    split = split_frontmatter(text)
    assert split.broken is True
    assert split.data == {}


def test_repeated_key_keeps_the_last_value() -> None:
    assert split_frontmatter("---\ntags:\ntitle: T\ntags: []\n---\n").data == {"tags": [], "title": "T"}


@pytest.mark.parametrize("items", [MAX_FRONTMATTER_VALUES - 3, MAX_FRONTMATTER_VALUES - 2])
def test_the_value_limit_counts_every_value(items: int) -> None:
    # A mapping, its key and its list count too: the limit falls between these two sizes.
    text = "---\nk: [" + ",".join("1" for _ in range(items)) + "]\n---\nx"
    assert split_frontmatter(text).broken is (items + 3 > MAX_FRONTMATTER_VALUES)
