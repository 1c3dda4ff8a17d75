"""On-demand, in-process benchmark of what one added and one deleted page cost serve.

    .venv/bin/python -m tests.benchmarks.bench_churn --pages 2000 20000 [--rounds 5] [--json out.json]

For each size it generates a wiki into tests/benchmarks/.generated/<n> (unless present), opens
it with a KnowledgeSource (inotify freshness, no restart cache) and leaves it as a started
service is: warmed up, one context pack answered. Then it adds a page that links to existing
pages and to a page that does not exist yet ("first add": the first change after start), deletes
it, and repeats that `--rounds` times. After each change it measures the CPU time (this
process's, user + system) of the next snapshot and of the first request of each kind that
follows, in this order: health counts (what /health shows; load balancers ask first), context
pack, search, neighbourhood, /graph. The median over the rounds is printed per step, the first
add on its own. The pages it adds are removed before exit.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from tests.benchmarks.generate import generate

GENERATED = Path(__file__).parent / ".generated"


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(call: Callable[[], Any]) -> float:
    started = cpu()
    call()
    return (cpu() - started) * 1000


def folder(pages: int) -> Path:
    root = GENERATED / str(pages)
    if not root.exists():
        generate(root, pages)
    return root


def measure(pages: int, rounds: int) -> dict[str, Any]:
    root = folder(pages)
    added = root / "churn-bench-added.md"
    added.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as cache:
        source = KnowledgeSource(ServeSettings(root=root, page_cache=False, cache_dir=Path(cache)))
        try:
            source.load()
            source.warm()
            some = [p.id for p in source.snapshot().approved_pages[:50]]
            seed = some[len(some) // 2]

            question = "how do I rotate the signing key"

            def requests() -> dict[str, float]:
                return {
                    "snapshot": timed(source.snapshot),
                    "health_counts": timed(lambda: source.snapshot().graph_counts),
                    "context": timed(lambda: source.context_json(source.request(query=question))),
                    "search": timed(lambda: source.search(source.request(query="rollback token"))),
                    "neighborhood": timed(lambda: source.neighborhood([seed], depth=1)),
                    "graph": timed(lambda: source.graph(limit=200)),
                }

            def add(turn: int) -> None:
                links = " ".join(f"[[{pid}]]" for pid in some[turn:turn + 5])
                added.write_text(f"---\ntitle: Churn Bench {turn}\ntags: [bench]\n---\n# Churn Bench\n\n"
                                 f"Links {links} and [[not-yet-{turn}]].\n", encoding="utf-8")

            source.context_json(source.request(query=question))  # a started service's first answer
            add(rounds)
            first_add = requests()
            added.unlink()
            requests()
            steps: dict[str, list[dict[str, float]]] = {"add": [], "delete": []}
            for turn in range(rounds):
                add(turn)
                steps["add"].append(requests())
                added.unlink()
                steps["delete"].append(requests())
        finally:
            added.unlink(missing_ok=True)
            source.close()
    first = {key: round(value, 1) for key, value in first_add.items()}
    result: dict[str, Any] = {"pages": pages, "first_add": {**first, "total": round(sum(first.values()), 1)}}
    for step, runs in steps.items():
        medians = {key: round(statistics.median(run[key] for run in runs), 1) for key in runs[0]}
        medians["total"] = round(sum(medians.values()), 1)
        result[step] = medians
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[2000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = []
    for pages in args.pages:
        result = measure(pages, args.rounds)
        print(json.dumps(result), flush=True)
        results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
