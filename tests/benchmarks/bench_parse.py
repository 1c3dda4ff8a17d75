"""Page parsing time: serve.source.parse.parse_page over real folders and adversarial pages.

    .venv/bin/python -m tests.benchmarks.bench_parse [--size BYTES] [--repeat N] [--no-tldr]
    PYTHONPATH=/tmp/code-<commit> .venv/bin/python -m tests.benchmarks.bench_parse   # one commit

Folders: the tldr corpus (14,071 pages, when ../shared/corpora has it) and every page under
fixtures/; best of --repeat passes. Adversarial pages (tests/support/adversarial.py): one
parse each of --size characters (default 1 MiB), with its ratio to a plain page of the same
size; a page over --limit seconds is reported and skipped (it is timed in a child process).
In process, one core; no pass/fail exit code.
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import time
from pathlib import Path

from tests.support import judged as J
from tests.support.adversarial import ADVERSARIAL, MB, plain_page

REPO = Path(__file__).resolve().parents[2]


def _parse_all(texts: list[tuple[str, str]]) -> float:
    from serve.source.page import ParseOptions
    from serve.source.parse import parse_page

    options = ParseOptions()
    start = time.perf_counter()
    for path, text in texts:
        parse_page(text, path, options)
    return time.perf_counter() - start


def _timed_child(name: str, size: int, out: multiprocessing.Queue[float]) -> None:
    text = plain_page(size) if name == "plain" else ADVERSARIAL[name](size)
    out.put(_parse_all([("big.md", text)]))


def _one_page_seconds(name: str, size: int, limit: float) -> float | None:
    queue: multiprocessing.Queue[float] = multiprocessing.Queue()
    child = multiprocessing.Process(target=_timed_child, args=(name, size, queue))
    child.start()
    child.join(limit)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return queue.get()


def _folder_pages(root: Path) -> list[tuple[str, str]]:
    return [(str(p.relative_to(root)), p.read_text(encoding="utf-8", errors="replace"))
            for p in sorted(root.rglob("*.md")) if ".git" not in p.parts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_parse")
    parser.add_argument("--size", type=int, default=MB)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per adversarial page")
    parser.add_argument("--no-tldr", action="store_true")
    args = parser.parse_args(argv)

    import serve

    print(f"Python {platform.python_version()}, {platform.machine()}, serve from {serve.__file__}")
    folders: list[tuple[str, list[tuple[str, str]]]] = [
        ("fixtures/ (all pages)", _folder_pages(REPO / "fixtures"))]
    if not args.no_tldr:
        root = J.extract_tldr()
        if root is None:
            print(f"note: {J.TLDR_TARBALL} not found, tldr corpus skipped")
        else:
            folders.insert(0, ("tldr corpus", _folder_pages(root)))
    print(f"\n| folder | pages | MB | parse, best of {args.repeat} |\n| --- | ---: | ---: | ---: |")
    for label, pages in folders:
        seconds = min(_parse_all(pages) for _ in range(args.repeat))
        size = sum(len(text) for _, text in pages) / 1e6
        print(f"| {label} | {len(pages):,} | {size:.2f} | {seconds:.3f} s |")

    baseline = _one_page_seconds("plain", args.size, args.limit)
    print(f"\n| page of {args.size:,} characters | parse | x plain |\n| --- | ---: | ---: |")
    print(f"| plain prose | {baseline:.3f} s | 1.0 |" if baseline else "| plain prose | timeout | |")
    for name in ADVERSARIAL:
        seconds = _one_page_seconds(name, args.size, args.limit)
        if seconds is None:
            print(f"| {name!r} repeated | > {args.limit:.0f} s | |")
        else:
            ratio = f"{seconds / baseline:.1f}" if baseline else ""
            print(f"| {name!r} repeated | {seconds:.3f} s | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
