"""Retrieval quality and search latency over the judged sets in fixtures/judged/.

    .venv/bin/python -m tests.benchmarks.bench_retrieval [--engine service|reference|all]
        [--json [PATH]] [--per-query] [--repeat N] [--no-tldr]

Quality: for every judged set and slice, mean nDCG@10, Recall@10 and MRR@10 (helpers in
tests/support/judged.py, the same the regression gates in
tests/serve/retrieval/test_quality.py use), plus the leak check (a leak query may return
approved pages only).

Engines:

- ``service``: ``serve.service.KnowledgeSource`` search (needs the retrieval work);
- ``reference``: a plain re-implementation of the reference's *legacy* lexical search
  (contract 5.1-5.3: legacy tokenizer, one BM25 bag of title + summary + text + tags +
  source refs over approved pages, role multipliers, overview listing for token-less
  queries). It reproduces the contract's observed scores on fixtures/shapes/reference-sample
  and gives the "at least as good as the reference" line of the spec.

Latency: every tldr query is searched ``--repeat`` times after one warm-up pass; median and
p99 per query in ms, plus the cold time (source creation + first search: scan, parse and
index 14,073 pages). The service is timed twice: with the snapshot reused (search alone)
and with the default strict freshness (inotify).

The tldr corpus (tldr-pages, CC-BY-4.0, (c) the tldr-pages team and contributors) is
extracted to ~/.cache/llmwiki-serve-tests/tldr/<sha256> (or $LLMWIKI_SERVE_TEST_CACHE),
never into the repository; without ../shared/corpora/tldr-en-ko.tar.gz it is skipped.
"""

from __future__ import annotations

import argparse
import math
import platform
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from serve.snapshot.projection import Projection, orientation_order
from serve.source.page import ROLE_RANK, Page
from serve.watch.mirror import FolderMirror
from tests.benchmarks.harness import publish
from tests.support import judged as J

K = 10
ROLE_MULTIPLIER = {"hot": 1.15, "index": 1.06, "overview": 1.03, "topic": 1.0}
K1 = 1.2
B = 0.75
LEGACY_TOKEN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*[\uac00-\ud7a3]*|[\uac00-\ud7a3]+")
ASCII_HANGUL_RE = re.compile(r"([a-z0-9]+)([\uac00-\ud7a3]+)")
HANGUL_ONLY_RE = re.compile(r"[\uac00-\ud7a3]+")

SearchIds = Callable[[str, int], list[str]]


# -- reference (legacy) lexical search -----------------------------------------------------


def legacy_tokens(text: str) -> list[str]:
    """Contract 5.2 legacy tokenizer."""
    out: list[str] = []
    for raw in LEGACY_TOKEN_RE.findall(text):
        token = raw.lower()
        out.append(token)
        split = ASCII_HANGUL_RE.fullmatch(token)
        if split:
            out.extend(split.groups())
        elif HANGUL_ONLY_RE.fullmatch(token) and len(token) > 2:
            out.extend(token[i:i + 2] for i in range(len(token) - 1))
    return out


def legacy_weight(token: str) -> float:
    if token.isdigit():
        return 0.2
    if len(token) == 1 and "\uac00" <= token <= "\ud7a3":
        return 0.4
    return 1.0


class ReferenceSearch:
    """Contract 5.1-5.3, legacy profile, approved corpus; lexical mode only."""

    def __init__(self, projection: Projection) -> None:
        self.pages: list[Page] = list(projection.approved_pages)
        self.overview = [p.id for p in orientation_order(self.pages)]
        self.postings: dict[str, list[tuple[int, int]]] = {}
        self.lengths: list[int] = []
        for doc, page in enumerate(self.pages):
            text = " ".join((page.title, page.summary, page.text, " ".join(page.tags),
                             " ".join(page.source_refs)))
            tokens = legacy_tokens(text)
            self.lengths.append(len(tokens))
            for token, freq in Counter(tokens).items():
                self.postings.setdefault(token, []).append((doc, freq))
        self.n = max(1, len(self.pages))
        self.avgdl = max(1.0, sum(self.lengths) / self.n)

    def scores(self, query: str) -> list[tuple[float, Page]]:
        tokens = list(dict.fromkeys(legacy_tokens(query)))
        acc: dict[int, float] = {}
        for token in tokens:
            posting = self.postings.get(token)
            if not posting:
                continue
            df = len(posting)
            idf = math.log(1 + (self.n - df + 0.5) / (df + 0.5))
            weight = legacy_weight(token)
            for doc, f in posting:
                dl = max(1, self.lengths[doc])
                tf = f * (K1 + 1) / (f + K1 * (1 - B + B * dl / self.avgdl))
                acc[doc] = acc.get(doc, 0.0) + idf * tf * weight
        hits = [(score * ROLE_MULTIPLIER.get(self.pages[d].role, 1.0), self.pages[d])
                for d, score in acc.items() if score > 0]
        hits.sort(key=lambda h: (-round(h[0], 4), ROLE_RANK.get(h[1].role, 3), h[1].path))
        return hits

    def search_ids(self, query: str, limit: int) -> list[str]:
        if not query.strip() or not legacy_tokens(query):
            return self.overview[:limit]  # overview listing (route "overview")
        return [page.id for _, page in self.scores(query)[:limit]]


def build_projection(root: Path) -> Projection:
    mirror = FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    return mirror.project()


# -- engines ---------------------------------------------------------------------------------


def service_available() -> bool:
    try:
        from serve.service import KnowledgeSource
    except ImportError:
        return False
    return callable(getattr(KnowledgeSource, "search", None))


class Engine:
    """Per-folder searchers for one engine, created on first use."""

    def __init__(self, name: str, *, strict: bool = False) -> None:
        self.name = name
        self.strict = strict
        self.searchers: dict[Path, SearchIds] = {}
        self.closers: list[Callable[[], None]] = []

    def searcher(self, root: Path) -> SearchIds:
        if root not in self.searchers:
            self.searchers[root] = self._make(root)
        return self.searchers[root]

    def _make(self, root: Path) -> SearchIds:
        if self.name == "reference":
            ref = ReferenceSearch(build_projection(root))
            return ref.search_ids
        from serve.service import KnowledgeSource
        from serve.settings import ServeSettings

        if self.strict:  # the served default: strict freshness, inotify
            settings = ServeSettings(root=root, page_cache=False)
        else:  # the folder never changes here: reuse the snapshot, time search alone
            settings = ServeSettings(root=root, page_cache=False, inotify=False,
                                     refresh_interval_seconds=3600.0)
        source = KnowledgeSource(settings)
        self.closers.append(source.close)
        return lambda query, limit: J.service_search_ids(source, query, limit)

    def close(self) -> None:
        for close in self.closers:
            close()
        self.closers.clear()
        self.searchers.clear()


# -- quality ---------------------------------------------------------------------------------


def quality(engine: Engine, judgements: Sequence[J.Judgement], tldr_root: Path | None,
            approved: Callable[[Path], set[str]]) -> dict[str, Any]:
    def root_of(j: J.Judgement) -> Path:
        return J.resolve_folder(j.folder, tldr_root)

    scores = J.score_queries(lambda j: engine.searcher(root_of(j))(j.query, K), judgements, K)
    summary = J.summarize(scores, K)
    leaks = []
    for s in scores:
        if s.judgement.is_leak:
            bad = J.leaked_ids(engine.searcher(root_of(s.judgement))(s.judgement.query, 100),
                               approved(root_of(s.judgement)))
            if bad:
                leaks.append({"id": s.judgement.id, "leaked": bad})
    per_query = [{"set": s.judgement.set_name, "id": s.judgement.id, "slice": s.judgement.slice,
                  "query": s.judgement.query, "ndcg": round(s.ndcg, 4), "recall": round(s.recall, 4),
                  "mrr": round(s.mrr, 4), "top": list(s.ranked_ids[:K]),
                  "relevant": dict(s.judgement.relevant)} for s in scores]
    return {"summary": summary, "leaks": leaks, "per_query": per_query}


# -- latency ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def latency(engine: Engine, root: Path, queries: Sequence[str], repeat: int) -> dict[str, Any]:
    start = time.perf_counter()
    search = engine.searcher(root)
    search(queries[0], K)
    cold_ms = (time.perf_counter() - start) * 1000
    for q in queries:  # warm-up pass
        search(q, K)
    samples: list[float] = []
    for _ in range(repeat):
        for q in queries:
            t0 = time.perf_counter()
            search(q, K)
            samples.append((time.perf_counter() - t0) * 1000)
    return {"queries": len(queries), "samples": len(samples), "cold_ms": round(cold_ms, 1),
            "median_ms": round(statistics.median(samples), 3), "p99_ms": round(percentile(samples, 99), 3),
            "max_ms": round(max(samples), 3)}


# -- report ----------------------------------------------------------------------------------


def markdown(report: dict[str, Any]) -> str:
    lines = ["## Retrieval quality (k = 10)", "",
             "| engine | set | slice | queries | nDCG@10 | Recall@10 | MRR@10 |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for name, result in report["quality"].items():
        for key, fig in result["summary"].items():
            set_name, slice_name = key.split("/")
            if slice_name == J.LEAK:
                leaked = len(result["leaks"])
                lines.append(f"| {name} | {set_name} | leak (only approved returned) | {fig['queries']} "
                             f"| {'ok' if not leaked else f'{leaked} LEAKED'} | | |")
                continue
            lines.append(f"| {name} | {set_name} | {slice_name} | {fig['queries']} | {fig['ndcg@10']:.4f} "
                         f"| {fig['recall@10']:.4f} | {fig['mrr@10']:.4f} |")
    if report["latency"]:
        lines += ["", "## Search latency over the tldr corpus (14,073 command pages + LICENSE)", "",
                  "| engine | mode | queries x repeat | cold (ms) | median (ms) | p99 (ms) | max (ms) |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for row in report["latency"]:
            lines.append(f"| {row['engine']} | {row['mode']} | {row['queries']} x {row['repeat']} "
                         f"| {row['cold_ms']:.1f} | {row['median_ms']:.3f} | {row['p99_ms']:.3f} "
                         f"| {row['max_ms']:.3f} |")
    lines += ["", f"Corpus: {J.TLDR_ATTRIBUTION}."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_retrieval",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("service", "reference", "all"), default="all",
                        help="which search to measure (default: all available)")
    parser.add_argument("--json", metavar="PATH", nargs="?", const="-",
                        help="also dump the raw figures as JSON (to PATH; '-' or no PATH: stdout, "
                             "with the table on stderr)")
    parser.add_argument("--per-query", action="store_true", help="include every query's ranking in the JSON")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed passes over the tldr queries (default 3)")
    parser.add_argument("--no-tldr", action="store_true", help="skip the tldr corpus")
    parser.add_argument("--no-latency", action="store_true", help="skip the latency runs")
    args = parser.parse_args(argv)

    has_service = service_available()
    if args.engine == "service" and not has_service:
        print("KnowledgeSource.search is not available yet", file=sys.stderr)
        return 2
    names = ["reference", "service"] if args.engine == "all" else [args.engine]
    names = [n for n in names if n != "service" or has_service]

    judgements = J.load_judged(J.FIXTURES_SET)
    tldr_root = None
    if not args.no_tldr:
        tldr_root = J.extract_tldr()
        if tldr_root is None:
            print(f"note: {J.TLDR_TARBALL} not found, tldr set skipped", file=sys.stderr)
        else:
            judgements += J.load_judged(J.TLDR_SET)

    approved_cache: dict[Path, set[str]] = {}

    def approved(root: Path) -> set[str]:
        if root not in approved_cache:
            approved_cache[root] = {p.id for p in build_projection(root).approved_pages}
        return approved_cache[root]

    report: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": __import__("os").cpu_count()},
        "k": K, "engines": names, "quality": {}, "latency": [],
    }
    for name in names:
        engine = Engine(name)
        try:
            result = quality(engine, judgements, tldr_root, approved)
            if not args.per_query:
                result.pop("per_query")
            report["quality"][name] = result
            if tldr_root is not None and not args.no_latency:
                queries = [j.query for j in judgements if j.folder == J.TLDR_FOLDER]
                engine.close()
                mode = "snapshot reused" if name == "service" else "in-process index"
                report["latency"].append({"engine": name, "mode": mode, "repeat": args.repeat,
                                          **latency(engine, tldr_root, queries, args.repeat)})
                if name == "service":
                    strict = Engine(name, strict=True)
                    try:
                        report["latency"].append({"engine": name, "mode": "strict freshness (inotify)",
                                                  "repeat": args.repeat,
                                                  **latency(strict, tldr_root, queries, args.repeat)})
                    finally:
                        strict.close()
        finally:
            engine.close()

    publish(markdown(report), report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
