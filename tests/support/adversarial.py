"""Pages of one repeated construct, for the parser's linear-time checks (the unit test in
tests/serve/source/test_prose.py and tests/benchmarks/bench_parse.py): each is about `size`
characters of something a backtracking pattern or a nesting-happy parser chokes on."""

from __future__ import annotations

from collections.abc import Callable

MB = 1 << 20

_CONSTRUCTS: dict[str, Callable[[int], str]] = {
    "[": lambda n: "[" * n,
    "[[": lambda n: "[[" * (n // 2),
    "![": lambda n: "![" * (n // 2),
    "[a](": lambda n: "[a](" * (n // 4),
    "[a](#": lambda n: "[a](#" * (n // 5) + "x.md)",
    "(": lambda n: "(" * n,
    "`": lambda n: "`" * n,
    "`a": lambda n: "`a" * (n // 2),
    "``a`": lambda n: "``a`" * (n // 4),
    "#": lambda n: "#" * n,
    "#\\n": lambda n: "#\n" * (n // 2),
    "# a + spaces": lambda n: "# a" + " " * n + "b",
    "```\\n": lambda n: "```\n" * (n // 4),
    "|": lambda n: "|" * n,
    ">": lambda n: ">" * n,
    "<a ": lambda n: "<a " * (n // 3),
    "<pre>": lambda n: "<pre>" * (n // 5),
    "*_": lambda n: "*_" * (n // 2),
    "nested bullets": lambda n: "".join("  " * (i % 200) + "- [[x]] #t `c`\n" for i in range(n // 215)),
}

# Each page starts with a link and a tag, so that the parser scans its prose (a page that
# can hold neither skips that work).
LEAD = "[[start]] #start\n"
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    name: (lambda n, make=make: LEAD + make(n - len(LEAD))) for name, make in _CONSTRUCTS.items()}


def plain_page(size: int) -> str:
    """Ordinary prose with a wikilink, a Markdown link, a tag and inline code per line."""
    line = "Some prose with a [[link]], a [page](page.md), #tag and `code`.\n\n"
    return (line * (size // len(line) + 1))[:size]
