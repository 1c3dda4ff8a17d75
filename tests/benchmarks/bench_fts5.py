"""On-demand benchmark: serve's BM25 search beside SQLite FTS5 on the same pages (issue 25).

    .venv/bin/python -m tests.benchmarks.bench_fts5 --pages 20000 [--queries 300] [--json]

Issue 25 asks the ranking data's engine to be chosen by measurement: FTS5 (qmd's choice) or
our BM25 arrays. Both run in this process over the pages serve parsed from a generated folder
(`tests/benchmarks/.generated/<n>`, made when absent; serve's store in a temporary cache
directory): serve's whole `/search` work without HTTP (`KnowledgeSource.search`, limit 10),
and an FTS5 table of the same fields (title, headings, tags, path, body; `unicode61`
tokenizer, column weights like ours: title first) queried with the question's words OR-ed,
`ORDER BY bm25(...) LIMIT 10`, then each hit's title and path read, as a result list needs.
Queries are drawn (seeded) from the pages' titles and headings plus natural questions, each
asked once (serve memoises recent results). The figures: build time, size, and per-query
p50 / p99 after a warm-up pass over other questions. Speed only: ranking
quality is the judged sets' business, and FTS5 would need our analyzer (Korean, identifiers)
as a tokenizer to be compared there.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.benchmarks.generate import generate
from tests.benchmarks.harness import install_deadline, machine, percentile

GENERATED = Path(__file__).resolve().parent / ".generated"
NATURAL = ("how do I roll back a release", "billing refund window for annual plans",
           "rotate the vault token", "why does the cache invalidation queue stall",
           "release pipeline signing checksum", "deploy canary metrics")
WORD_RE = re.compile(r"\w+")
WEIGHTS = (10.0, 5.0, 5.0, 3.0, 1.0)  # title, headings, tags, path, body


def queries(pages: list[Any], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    drawn = list(NATURAL)
    while len(drawn) < count:
        page = rng.choice(pages)
        drawn.append(rng.choice([page.title, *page.headings]) if page.headings else page.title)
    return drawn


def fts_build(pages: list[Any], path: Path) -> tuple[sqlite3.Connection, float]:
    started = time.perf_counter()
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(title, headings, tags, path, body, "
                 "tokenize = 'unicode61 remove_diacritics 2')")
    with conn:
        conn.executemany("INSERT INTO docs (rowid, title, headings, tags, path, body) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         ((i, p.title, " ".join(p.headings), " ".join(p.tags), p.path, p.text)
                          for i, p in enumerate(pages)))
    return conn, time.perf_counter() - started


def fts_search(conn: sqlite3.Connection, pages: list[Any], query: str) -> list[tuple[str, str]]:
    words = WORD_RE.findall(query)
    if not words:
        return []
    match = " OR ".join('"' + word.replace('"', "") + '"' for word in words)
    rows = conn.execute(f"SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs, "
                        f"{', '.join(map(str, WEIGHTS))}) LIMIT 10", (match,)).fetchall()
    return [(pages[rowid].title, pages[rowid].path) for (rowid,) in rows]


def timed(run: Any, items: list[str], warm_up: list[str]) -> list[float]:
    """Milliseconds per item, sorted, after a pass over other items (serve keeps recent
    results per snapshot: a repeated question would measure that memo)."""
    for item in warm_up:
        run(item)
    out = []
    for item in items:
        started = time.perf_counter()
        run(item)
        out.append((time.perf_counter() - started) * 1000)
    return sorted(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=20000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-seconds", type=float, default=1800)
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args()
    install_deadline(args.max_seconds, "bench_fts5: time limit reached")
    from serve.service import KnowledgeSource  # after the deadline: imports are part of no figure
    from serve.settings import ServeSettings

    folder = GENERATED / str(args.pages)
    if not folder.is_dir():
        generate(folder, pages=args.pages)
    with tempfile.TemporaryDirectory(prefix="bench-fts5-") as work:
        source = KnowledgeSource(ServeSettings(root=folder, cache_dir=Path(work) / "cache"))
        try:
            snapshot = source.snapshot()
            source.warm()
            pages = list(snapshot.approved_pages)
            asked = queries(pages, args.queries, args.seed)
            warm_up = [f"{q} {n}" for n, q in enumerate(queries(pages, 30, args.seed + 1))]

            def ours(query: str) -> Any:
                return source.search(source.request(query=query, limit=10))

            ours_ms = timed(ours, asked, warm_up)
            conn, build_s = fts_build(pages, Path(work) / "fts.sqlite3")
            fts_ms = timed(lambda q: fts_search(conn, pages, q), asked, warm_up)
            fts_mb = (Path(work) / "fts.sqlite3").stat().st_size / 1e6
            conn.close()
        finally:
            source.close()
    report = {"pages": args.pages, "queries": len(asked), "machine": machine(),
              "ours_ms": {"p50": percentile(ours_ms, 50), "p99": percentile(ours_ms, 99)},
              "fts5_ms": {"p50": percentile(fts_ms, 50), "p99": percentile(fts_ms, 99)},
              "fts5_build_s": build_s, "fts5_mb": fts_mb}
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    sys.stdout.write(f"{args.pages} pages, {len(asked)} queries\n"
                     f"| engine | p50 ms | p99 ms |\n| --- | ---: | ---: |\n"
                     f"| serve BM25 (whole /search work) | {report['ours_ms']['p50']:.2f} | "
                     f"{report['ours_ms']['p99']:.2f} |\n"
                     f"| FTS5 bm25 + hit titles | {report['fts5_ms']['p50']:.2f} | "
                     f"{report['fts5_ms']['p99']:.2f} |\n"
                     f"FTS5 build {build_s:.1f} s, {fts_mb:.0f} MB\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
