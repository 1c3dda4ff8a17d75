"""Natural questions over real public folders: nDCG@10, MRR@10, top-1 and top-3.

    .venv/bin/python -m tests.benchmarks.bench_natural [--engine service|reference|all]
        [--set NAME ...] [--json [PATH]] [--per-query]

Questions: fixtures/judged/real-natural.jsonl by default, or the sets of issue 27 named by
--set (tests/support/natural_sets.py: paraphrase, korean, numbers, unanswerable-natural; all
written from reading the pages, before any search ran). Folders: the real-folders archive
(tests/support/real_folders.py; by default ../shared/corpora/real-folders.tar.gz, or
$LLMWIKI_REAL_FOLDERS) and the tldr corpus, unpacked outside the tree. With the service
engine, each set also reports how many unanswerable questions the context pack refuses
(``answerable: false``) and how many answerable ones it keeps.

Engines, as in bench_retrieval: ``service`` is ``serve.service.KnowledgeSource`` search,
the path the gates in tests/serve/retrieval/test_real_folders.py use; ``reference`` is
bench_retrieval's plain re-implementation of the reference's legacy lexical search. A
folder that the engine cannot serve scores every question 0 and is named in the report.

top-1 / top-3: share of answerable questions with an answering page (grade 2) in the first
1 / 3 results; MRR@10 counts any relevant page, as the other judged sets do.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from serve.errors import KnowledgeSourceError
from tests.benchmarks import bench_retrieval
from tests.benchmarks.harness import publish
from tests.support import judged as J
from tests.support import natural_sets as N
from tests.support import real_folders as R

K = 10
SearchIds = Callable[[str, int], list[str]]


class Engine(bench_retrieval.Engine):
    """bench_retrieval's engine, except that a folder it cannot serve answers nothing and is named
    in the report."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.failures: dict[str, str] = {}

    def _make(self, root: Path) -> SearchIds:
        try:
            search = super()._make(root)
        except KnowledgeSourceError as exc:
            self._failed(root, exc)
            return lambda query, limit: []

        def guarded(query: str, limit: int) -> list[str]:
            try:
                return search(query, limit)
            except KnowledgeSourceError as exc:
                self._failed(root, exc)
                return []

        return guarded

    def _failed(self, root: Path, exc: Exception) -> None:
        self.failures[root.name] = f"{type(exc).__name__}: {exc}".replace(str(root), root.name)


def run(engine: Engine, judgements: Sequence[J.Judgement], real_root: Path,
        tldr_root: Path | None = None) -> list[J.QueryScore]:
    return J.score_queries(
        lambda j: engine.searcher(N.folder_root(j.folder, real_root, tldr_root))(j.query, K),
        judgements, K)



def markdown(report: dict[str, Any]) -> str:
    lines = ["## Natural questions over real folders (k = 10)", "",
             "| engine | set | answerable | unanswerable | nDCG@10 | MRR@10 | top-1 | top-3 |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, result in report["engines"].items():
        for key, fig in result["figures"].items():
            if "mrr@10" not in fig:
                lines.append(f"| {name} | {key} | 0 | {fig['unanswerable']} | | | | |")
                continue
            lines.append(f"| {name} | {key} | {fig['questions']} | {fig['unanswerable']} "
                         f"| {fig['ndcg@10']:.4f} | {fig['mrr@10']:.4f} | {fig['top1']:.3f} "
                         f"| {fig['top3']:.3f} |")
        for folder, error in sorted(result["not_served"].items()):
            lines.append(f"\n{name}: `{folder}` not served ({error}); its questions score 0.")
    for name, result in report["engines"].items():
        if "answerable" in result:
            a = result["answerable"]
            lines.append(f"\n{name}: answerable: false on {a['refused']:.3f} of {a['unanswerable']} "
                         f"unanswerable questions; answerable: true kept on {a['kept']:.3f} of "
                         f"{a['answerable']} answerable ones.")
    lines += ["", f"Targets (issue 15): MRR@10 >= {R.TARGET_MRR}, top-3 >= {R.TARGET_TOP3} "
              "on answerable questions."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_natural",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--engine", choices=("service", "reference", "all"), default="all")
    parser.add_argument("--json", metavar="PATH", nargs="?", const="-",
                        help="also dump the figures as JSON (to PATH; '-' or no PATH: stdout)")
    parser.add_argument("--per-query", action="store_true", help="include every ranking in the JSON")
    parser.add_argument("--set", dest="sets", action="append", choices=[*N.SETS, "all"],
                        help="judged sets to run (repeatable; default real-natural)")
    args = parser.parse_args(argv)

    real_root = R.extract()
    if real_root is None:
        print(f"real folders not found: {R.TARBALL} (or ${R.ENV})", file=sys.stderr)
        return 2
    sets = list(N.SETS) if "all" in (args.sets or ()) else (args.sets or ["real-natural"])
    judgements = [j for name in sets for j in N.load(name)]
    tldr_root = J.extract_tldr() if any(j.folder == J.TLDR_FOLDER for j in judgements) else None
    names = ["reference", "service"] if args.engine == "all" else [args.engine]
    report: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "k": K, "sets": sets, "engines": {},
    }
    for name in names:
        engine = Engine(name)
        try:
            scores = run(engine, judgements, real_root, tldr_root)
        finally:
            engine.close()
        figures = (R.grouped(scores, K) if sets == ["real-natural"] else
                   {f"{set_name}/{key}": fig for set_name in sets for key, fig in
                    N.grouped([s for s in scores if s.judgement.set_name == set_name], K).items()})
        result: dict[str, Any] = {"figures": figures, "not_served": dict(engine.failures)}
        if name == "service":
            sources = N.Sources(real_root, tldr_root)
            try:
                result["answerable"] = N.answerable_shares(judgements, sources)
            finally:
                sources.close()
        if args.per_query:
            result["per_query"] = [
                {"id": s.judgement.id, "folder": s.judgement.folder, "query": s.judgement.query,
                 "ndcg": round(s.ndcg, 4), "mrr": round(s.mrr, 4), "top": list(s.ranked_ids[:K]),
                 "relevant": dict(s.judgement.relevant)} for s in scores]
        report["engines"][name] = result
    publish(markdown(report), report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
