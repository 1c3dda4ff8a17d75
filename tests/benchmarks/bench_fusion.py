"""The bridge's merged ranking over six real sources: merged MRR@10 against each source's own.

    .venv/bin/python -m tests.benchmarks.bench_fusion [--json PATH] [--per-query]

Questions: fixtures/judged/multi-source.jsonl; sources: tests/support/multi_source.py (six
`llmwiki-serve` processes over the corpora beside the project, unpacked outside the tree),
registered with one `llmwiki-agent-bridge`, all on 127.0.0.1 with ephemeral ports.

For each question, sequentially: one `evidence-only` run through the bridge (its `citations`
scored as they come: a citation counts for its own page and for the near-duplicates merged into
it), then `POST /query` (limit 8, as the bridge asks) on every source directly.

- merged MRR@10: the bridge's `citations`, as a client reads them.
- single-source MRR@10: the question asked of the source that answers it (of two, the better),
  its pack's evidence order. The issue's target: merged >= 90 % of it.
- offline alternatives: the same direct packs merged by each rule of `STRATEGIES` (the source
  order, round-robin/reciprocal-rank fusion, raw scores, ...), so rules can be compared without
  restarting the bridge; `bridge (shipped)` is the rule the bridge ships
  (`bridge.core.fusion`), when the checkout has it, with its parts taken out one at a time.
- run latency: the bridge's wall time per run, median and p95 (taken while other work ran).

Bounded: one pass over the set, every request with a timeout, every process stopped in `finally`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.benchmarks.harness import write_json_report
from tests.e2e.processes import Service, start_bridge, start_serve
from tests.support import judged as J
from tests.support import multi_source as M

QUERY_LIMIT = 8
Pack = dict[str, Any]
# A rule: the packs of the selected sources (source id -> pack, in selected order) -> ranked keys.
Strategy = Callable[[str, Mapping[str, Pack]], list[set[str]]]


def _items(pack: Pack) -> list[dict[str, Any]]:
    return [item for item in pack.get("evidence") or [] if isinstance(item, dict)]


def _key(source_id: str, item: Mapping[str, Any]) -> str:
    return f"{source_id}:{item.get('page_id') or item.get('id')}"


def source_order(query: str, packs: Mapping[str, Pack]) -> list[set[str]]:
    """The reference's rule: each source's evidence in turn, in selected order."""
    return [{_key(sid, item)} for sid, pack in packs.items() for item in _items(pack)]


def rrf(query: str, packs: Mapping[str, Pack], k: int = 60) -> list[set[str]]:
    """Reciprocal-rank fusion, 1 / (k + rank); ties keep the selected order."""
    scored = [(1.0 / (k + rank), order, {_key(sid, item)})
              for order, (sid, pack) in enumerate(packs.items())
              for rank, item in enumerate(_items(pack), 1)]
    scored.sort(key=lambda entry: (-entry[0], entry[1]))
    return [keys for _, _, keys in scored]


def rrf_answerable(query: str, packs: Mapping[str, Pack]) -> list[set[str]]:
    """Reciprocal-rank fusion, the sources answering `answerable: false` after the others."""
    able = {sid: p for sid, p in packs.items() if p.get("answerable") is not False}
    unable = {sid: p for sid, p in packs.items() if p.get("answerable") is False}
    return rrf(query, able) + rrf(query, unable)


def raw_score(query: str, packs: Mapping[str, Pack]) -> list[set[str]]:
    """The sources' own scores compared as they are (each source scores on its own scale)."""
    scored = [(float(item.get("score") or 0.0), order, {_key(sid, item)})
              for order, (sid, pack) in enumerate(packs.items()) for item in _items(pack)]
    scored.sort(key=lambda entry: (-entry[0], entry[1]))
    return [keys for _, _, keys in scored]


def max_normalised(query: str, packs: Mapping[str, Pack]) -> list[set[str]]:
    """Each source's scores divided by its best one."""
    scored = []
    for order, (sid, pack) in enumerate(packs.items()):
        items = _items(pack)
        top = max((float(i.get("score") or 0.0) for i in items), default=0.0) or 1.0
        scored += [(float(i.get("score") or 0.0) / top, order, {_key(sid, i)}) for i in items]
    scored.sort(key=lambda entry: (-entry[0], entry[1]))
    return [keys for _, _, keys in scored]


STRATEGIES: dict[str, Strategy] = {"source-order": source_order, "rrf-60": rrf,
                                   "rrf-60+answerable": rrf_answerable, "raw-score": raw_score,
                                   "max-normalised": max_normalised}


def _citations(source_id: str, pack: Pack) -> list[Any]:
    from common.bridge_schemas import Citation

    return [Citation(id=_key(source_id, i), source_id=source_id, page_id=str(i.get("page_id")),
                     title=str(i.get("title") or ""), path=str(i.get("path") or ""),
                     score=i.get("score"), snippet=str(i.get("snippet") or ""), connection_id=source_id)
            for i in _items(pack)]


def shipped(peak: float | None = None, rrf_k: int | None = None, keep_best: bool = True) -> Strategy:
    """The bridge's rule (`bridge.core.fusion.fuse`) over the direct packs; with `peak` or
    `rrf_k` changed, or without the top-window guarantee, to show what each part brings."""
    from bridge.core import fusion

    def rule(query: str, packs: Mapping[str, Pack]) -> list[set[str]]:
        saved = fusion.PEAK_WEIGHT, fusion.RRF_K, fusion.TOP_WINDOW
        fusion.PEAK_WEIGHT = saved[0] if peak is None else peak
        fusion.RRF_K = saved[1] if rrf_k is None else rrf_k
        fusion.TOP_WINDOW = saved[2] if keep_best else 0
        try:
            groups = [fusion.Ranked(_citations(sid, p), p.get("answerable") is not False)
                      for sid, p in packs.items()]
            fused = fusion.fuse(query, groups)
        finally:
            fusion.PEAK_WEIGHT, fusion.RRF_K, fusion.TOP_WINDOW = saved
        return [{c.id, *(a.id for a in c.also_in or ())} for c in fused]

    return rule


def _bridge_strategies() -> dict[str, Strategy]:
    """The shipped rule and its parts, when this checkout has it (not before issue 29)."""
    try:
        import bridge.core.fusion  # noqa: F401
    except ImportError:
        return {}
    return {"bridge (shipped)": shipped(), "bridge without the peak term": shipped(peak=0.0),
            "bridge without the rank term": shipped(rrf_k=10**9),
            "bridge without the top-window guarantee": shipped(keep_best=False)}


# -- the run -------------------------------------------------------------------------------------

def start_all(work: Path, roots: Mapping[str, Path]) -> tuple[dict[str, Service], Service]:
    serves: dict[str, Service] = {}
    for sid, root in roots.items():
        serves[sid] = start_serve(work / sid, root, name=sid)
    bridge = start_bridge(work / "bridge")
    registry = [{"id": sid, "name": sid, "protocol": "llmwiki-http", "status": "ready", "url": s.url}
                for sid, s in serves.items()]
    saved = httpx.put(f"{bridge.url}/settings/sources.json", json=registry, timeout=30)
    saved.raise_for_status()
    return serves, bridge


def run(judgements: Sequence[J.Judgement], serves: Mapping[str, Service], bridge: Service,
        extra: Mapping[str, Any] | None = None, compare: bool = False) -> dict[str, Any]:
    strategies = {**STRATEGIES, **_bridge_strategies()}
    merged, single, latencies, source_merged, source_latencies = [], [], [], [], []
    offline: dict[str, list[float]] = {name: [] for name in strategies}
    per_query = []
    with httpx.Client(timeout=60) as client:

        def ask(query: str, order: Mapping[str, Any]) -> tuple[list[dict[str, Any]], float]:
            started = time.perf_counter()
            body = {"data": {"query": query, "orchestrationMode": "evidence-only", **order}}
            answer = client.post(f"{bridge.url}/message:send", json=body)
            spent = (time.perf_counter() - started) * 1000
            answer.raise_for_status()
            return answer.json()["artifacts"][0]["parts"][0]["data"]["citations"], spent

        for number, j in enumerate(judgements):
            # With --compare, the reference's order under the same load, first every other time
            # (a source may answer a question it has just answered faster).
            if compare and number % 2:
                in_source_order, spent = ask(j.query, {"citationOrder": "source"})
                source_latencies.append(spent)
                source_merged.append(M.merged_rr(in_source_order, j))
            citations, spent = ask(j.query, extra or {})
            latencies.append(spent)
            merged_rr = M.merged_rr(citations, j)
            if compare and not number % 2:
                in_source_order, spent = ask(j.query, {"citationOrder": "source"})
                source_latencies.append(spent)
                source_merged.append(M.merged_rr(in_source_order, j))
            packs = {sid: client.post(f"{s.url}/query", json={"query": j.query, "limit": QUERY_LIMIT}).json()
                     for sid, s in serves.items()}
            own = max(M.single_source_rr(sid, [str(i.get("page_id")) for i in _items(packs[sid])], j)
                      for sid in M.answering_sources(j))
            merged.append(merged_rr)
            single.append(own)
            for name, rule in strategies.items():
                offline[name].append(M.reciprocal_rank(rule(j.query, packs), j.relevant))
            per_query.append({"id": j.id, "merged": merged_rr, "single": own,
                              "first": [c["id"] for c in citations[:3]]})
    report: dict[str, Any] = {}
    if compare:
        report = {"source_order_mrr@10": statistics.fmean(source_merged),
                  "source_order_run_ms_median": statistics.median(source_latencies),
                  "source_order_run_ms_p95": _p95(source_latencies)}
    return {
        "questions": len(judgements),
        "merged_mrr@10": statistics.fmean(merged),
        "single_source_mrr@10": statistics.fmean(single),
        "ratio": statistics.fmean(merged) / max(statistics.fmean(single), 1e-9),
        "offline_mrr@10": {name: statistics.fmean(values) for name, values in offline.items()},
        "run_ms_median": statistics.median(latencies),
        "run_ms_p95": _p95(latencies),
        **report,
        "per_query": per_query,
    }


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(int(len(ordered) * 0.95) - 1, 0)]


def markdown(report: Mapping[str, Any]) -> str:
    lines = ["## Merged ranking over six sources (k = 10), taken while other work ran", "",
             f"- questions: {report['questions']}",
             f"- merged MRR@10 (through the bridge): {report['merged_mrr@10']:.3f}",
             f"- single-source MRR@10 (each question asked of its source): "
             f"{report['single_source_mrr@10']:.3f}",
             f"- merged / single: {report['ratio'] * 100:.1f} %",
             f"- bridge run, median / p95: {report['run_ms_median']:.1f} / {report['run_ms_p95']:.1f} ms",
             *([f"- the same runs with citationOrder source, alternating: MRR@10 "
                f"{report['source_order_mrr@10']:.3f}, median / p95 "
                f"{report['source_order_run_ms_median']:.1f} / {report['source_order_run_ms_p95']:.1f} ms"]
               if "source_order_mrr@10" in report else []),
             "", "| rule (offline, same packs) | MRR@10 |", "| --- | ---: |"]
    lines += [f"| {name} | {value:.3f} |" for name, value in report["offline_mrr@10"].items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_fusion", description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="write the raw figures as JSON (- for stdout)")
    parser.add_argument("--per-query", action="store_true", help="print each question's figures")
    parser.add_argument("--citation-order", choices=("source", "relevance"),
                        help="send this citationOrder with every run")
    parser.add_argument("--compare", action="store_true",
                        help="after each run, the same question with citationOrder source (latency under the "
                             "same load)")
    args = parser.parse_args(argv)
    roots = M.roots()
    if roots is None:
        print("the corpora are not beside the project (../shared/corpora)", file=sys.stderr)
        return 2
    extra = {"citationOrder": args.citation_order} if args.citation_order else None
    with tempfile.TemporaryDirectory(prefix="bench-fusion-") as tmp:
        services: list[Service] = []
        try:
            serves, bridge = start_all(Path(tmp), roots)
            services = [*serves.values(), bridge]
            report = run(M.load(), serves, bridge, extra, args.compare)
        finally:
            for service in services:
                service.stop()
    print(markdown(report))
    if args.per_query:
        for row in report["per_query"]:
            print(f"{row['id']}: merged {row['merged']:.2f} single {row['single']:.2f} {row['first']}")
    if args.json:
        write_json_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
