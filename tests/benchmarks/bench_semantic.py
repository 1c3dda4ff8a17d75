"""Would an offline static embedding model help? wordllama against lexical search, on the
judged sets of questions worded as people ask them (issue 27).

    .venv/bin/python -m tests.benchmarks.bench_semantic [--json [PATH]] [--document FIELDS]

wordllama 0.4.0.post1 (PyPI) ships its 256-dimension model (l2_supercat: a token embedding
table of Llama 2's 32,000 tokens) and tokenizer inside the wheel. The benchmark installs it
with pip into a cache folder outside the tree (~/.cache/llmwiki-bench/wordllama) and reads
the two files itself: wordllama's own loader looks in a folder the wheel does not have and
then downloads from Hugging Face, which this benchmark must never do. A text's vector is the
mean of its tokens' vectors, normalised (wordllama's pooling).

For each answerable question of each set: MRR@10 of serve's lexical ranking (the service
engine), of the vectors alone (cosine over the folder's visible pages) and of reciprocal-rank
fusions of the two (k = 60 or 10, lexical weighted 1, 3 or 5 to 1), and of "fallback" (the
vectors only when lexical search finds nothing). Documents are embedded from the fields named
by --document: t (title), s (summary), h (headings), b (the first 1,500 characters of the body).
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tests.benchmarks.harness import publish
from tests.support import judged as J
from tests.support import natural_sets as N
from tests.support import real_folders as R

K = 10
WORDLLAMA = "wordllama==0.4.0.post1"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmwiki-bench" / "wordllama"
WEIGHTS = ("weights", "l2_supercat_256.safetensors")
TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
SETS = ("real-natural", "paraphrase", "korean", "numbers")
Ranker = Callable[[str, str], list[str]]


def install(where: Path = CACHE) -> Path:
    """wordllama's package folder, pip-installed into `where` (with tokenizers and
    safetensors, which read its files) on first use."""
    package = where / "wordllama"
    if not (package.joinpath(*WEIGHTS).is_file() and package.joinpath(*TOKENIZER).is_file()):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(where),
                        "--no-deps", WORDLLAMA, "tokenizers", "safetensors"], check=True)
    return package


class StaticModel:
    """Mean-pooled token vectors from wordllama's bundled files, with no network path."""

    def __init__(self, package: Path) -> None:
        sys.path.insert(0, str(package.parent))
        safetensors = importlib.import_module("safetensors")
        tokenizers = importlib.import_module("tokenizers")
        with safetensors.safe_open(str(package.joinpath(*WEIGHTS)), framework="np") as handle:
            self.table = handle.get_tensor("embedding.weight").astype(np.float32)
        self.tokenizer = tokenizers.Tokenizer.from_file(str(package.joinpath(*TOKENIZER)))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        for row, encoding in enumerate(self.tokenizer.encode_batch(list(texts))):
            if encoding.ids:
                out[row] = self.table[encoding.ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def document(payload: dict[str, Any], fields: str) -> str:
    parts = [payload["title"]]
    if "s" in fields:
        parts.append(payload.get("summary") or "")
    if "h" in fields:
        parts.append(" ".join(payload.get("headings") or []))
    if "b" in fields:
        parts.append(payload["text"][:1500])
    return "\n".join(parts)


def vector_ranker(model: StaticModel, sources: N.Sources, fields: str,
                  timings: dict[str, float]) -> Ranker:
    folders: dict[str, tuple[list[str], np.ndarray]] = {}

    def rank(folder: str, query: str) -> list[str]:
        if folder not in folders:
            source = sources(folder)
            ids = [p.id for p in source.snapshot().approved_pages]
            started = time.perf_counter()
            vectors = model.embed([document(source.read(i).payload, fields) for i in ids])
            timings[N.folder_name(folder)] = time.perf_counter() - started
            folders[folder] = (ids, vectors)
        ids, vectors = folders[folder]
        scores = vectors @ model.embed([query])[0]
        return [ids[i] for i in np.argsort(-scores)[:50]]

    return rank


def fused(lists: Sequence[list[str]], k: int, weights: Sequence[float]) -> list[str]:
    """Reciprocal-rank fusion."""
    scores: dict[str, float] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        for rank, pid in enumerate(ranked):
            scores[pid] = scores.get(pid, 0.0) + weight / (k + rank + 1)
    return sorted(scores, key=lambda pid: -scores[pid])


def run(sources: N.Sources, vectors: Ranker) -> dict[str, dict[str, float]]:
    report: dict[str, dict[str, float]] = {}
    for name in SETS:
        figures: dict[str, list[float]] = {}
        for j in N.load(name):
            if j.is_leak:
                continue
            lexical = R.ranked_ids(sources(j.folder), j.query, 50)
            vector = vectors(j.folder, j.query)
            rankings = {"lexical": lexical, "vector": vector,
                        "rrf k60 1:1": fused([lexical, vector], 60, (1, 1)),
                        "rrf k60 3:1": fused([lexical, vector], 60, (3, 1)),
                        "rrf k60 5:1": fused([lexical, vector], 60, (5, 1)),
                        "rrf k10 3:1": fused([lexical, vector], 10, (3, 1)),
                        "fallback": lexical or vector}
            for key, ranked in rankings.items():
                figures.setdefault(key, []).append(J.mrr_at_k(ranked, j.relevant, K))
        report[name] = {key: round(sum(v) / len(v), 4) for key, v in figures.items()}
    return report


def markdown(report: dict[str, Any]) -> str:
    keys = list(next(iter(report["mrr@10"].values())))
    lines = [f"## wordllama against lexical search: MRR@10 (documents: {report['document']})", "",
             "| set | " + " | ".join(keys) + " |", "| --- |" + " ---: |" * len(keys)]
    for name, figures in report["mrr@10"].items():
        lines.append(f"| {name} | " + " | ".join(f"{figures[k]:.3f}" for k in keys) + " |")
    embed = ", ".join(f"{k} {v:.2f} s" for k, v in report["embed_seconds"].items())
    lines += ["", f"Embedding the folders' pages: {embed}."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_semantic",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--document", default="tshb", help="fields embedded per page (t, s, h, b)")
    parser.add_argument("--json", metavar="PATH", nargs="?", const="-",
                        help="also dump the figures as JSON (to PATH; '-' or no PATH: stdout)")
    args = parser.parse_args(argv)
    real_root = R.extract()
    if real_root is None:
        print(f"real folders not found: {R.TARBALL} (or ${R.ENV})", file=sys.stderr)
        return 2
    model = StaticModel(install())
    sources = N.Sources(real_root, J.extract_tldr())
    timings: dict[str, float] = {}
    try:
        figures = run(sources, vector_ranker(model, sources, args.document, timings))
    finally:
        sources.close()
    report = {"machine": {"python": platform.python_version(), "platform": platform.platform()},
              "model": WORDLLAMA, "document": args.document, "mrr@10": figures,
              "embed_seconds": {k: round(v, 2) for k, v in timings.items()}}
    publish(markdown(report), report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
