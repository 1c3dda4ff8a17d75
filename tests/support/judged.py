"""Judged query sets for retrieval quality: loading, metrics, the tldr corpus and its
known-item set.

Judged sets live in ``fixtures/judged/*.jsonl``, one JSON object per line::

    {"id": "en-01", "folder": "sample-wiki", "query": "...", "relevant": {"hot": 2}}

``folder`` is a fixture folder relative to ``fixtures/`` or ``corpus:tldr`` (the tldr
corpus, extracted outside the repository). ``relevant`` maps projection page ids to a
grade: 2 answers the query, 1 is partially relevant. An empty ``relevant`` marks a *leak*
query: its only matching page is withheld, so the expected result is "no relevant page",
and callers check that every returned page id is an approved page instead of scoring it.

The slice of a query comes from the prefix of its id (see ``SLICES``): ``en``, ``ko``,
``ja``, ``zh``, ``id`` (code identifiers) and ``leak`` in ``fixtures.jsonl``; ``en`` and
``ko`` in ``tldr-known-item.jsonl``.

Regenerate the tldr known-item set (deterministic; reads the tarball directly)::

    python -m tests.support.judged --write
    python -m tests.support.judged --check     # exit 1 if the committed file is stale

The tldr pages are (c) the tldr-pages team and contributors, licensed CC-BY-4.0
(https://github.com/tldr-pages/tldr); the generated queries are derived from their
descriptions and carry the same licence and attribution.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import tarfile
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

REPO: Path = Path(__file__).resolve().parents[2]
FIXTURES: Path = REPO / "fixtures"
JUDGED_DIR: Path = FIXTURES / "judged"
FIXTURES_SET: Path = JUDGED_DIR / "fixtures.jsonl"
TLDR_SET: Path = JUDGED_DIR / "tldr-known-item.jsonl"
JUDGED_SETS: tuple[Path, ...] = (FIXTURES_SET, TLDR_SET)
UNANSWERABLE_SET: Path = JUDGED_DIR / "unanswerable.jsonl"

TLDR_FOLDER = "corpus:tldr"
TLDR_TARBALL: Path = Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "tldr-en-ko.tar.gz"
TLDR_ATTRIBUTION = (
    "tldr-pages (https://github.com/tldr-pages/tldr), (c) the tldr-pages team and "
    "contributors, CC-BY-4.0"
)
TLDR_SEED = "llmwiki-serve/tldr-known-item/v1"
TLDR_PER_LANGUAGE = 150
MIN_QUERY_WORDS = 4
CACHE_ENV = "LLMWIKI_SERVE_TEST_CACHE"
# Set by .ci/run: there the corpus is always beside the checkout, so its absence is a failure.
REQUIRE_CORPORA_ENV = "LLMWIKI_REQUIRE_CORPORA"

LEAK = "leak"
# Slice of a query by set (file stem) and id prefix.
SLICES: dict[str, dict[str, str]] = {
    "fixtures": {"en": "en", "ko": "ko-cjk", "ja": "ko-cjk", "zh": "ko-cjk", "id": "identifiers",
                 "leak": LEAK},
    "tldr-known-item": {"en": "en", "ko": "ko"},
    "real-natural": {"en": "en", "ko": "ko"},  # tests/support/real_folders.py
    # Questions no page answers (tests/serve/retrieval/test_answerable.py); un2 was written
    # after the answerable rule was tuned on un, as its held-out part.
    "unanswerable": {"un": "unanswerable", "un2": "unanswerable"},
    # Questions over six sources at once, for the bridge's merged ranking (tests/support/multi_source.py).
    "multi-source": {"ms": "multi-source"},
    # Questions worded as people ask them (tests/support/natural_sets.py).
    "paraphrase": {"en": "en", "ko": "ko"},
    "korean": {"ko": "ko", "kx": "ko-over-en"},
    "numbers": {"num": "numbers"},
    "unanswerable-natural": {"un": "unanswerable"},
}
GRADES = (1, 2)


# -- judged sets ------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    """One judged query."""

    id: str
    folder: str
    query: str
    relevant: Mapping[str, int]
    set_name: str = ""  # file stem, e.g. "fixtures"
    slice: str = ""  # e.g. "en", "ko-cjk", "identifiers", "leak"

    @property
    def is_leak(self) -> bool:
        return not self.relevant


def slice_of(set_name: str, judgement_id: str) -> str:
    prefix = judgement_id.split("-", 1)[0]
    try:
        return SLICES[set_name][prefix]
    except KeyError:
        raise ValueError(f"{set_name}: id {judgement_id!r} has no known slice prefix") from None


def load_judged(path: Path | str) -> list[Judgement]:
    """Read a JSON Lines judged set; raises ValueError on malformed lines."""
    path = Path(path)
    set_name = path.stem
    out: list[Judgement] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path.name}:{number}: invalid JSON: {exc}") from None
            if not isinstance(raw, dict) or set(raw) != {"id", "folder", "query", "relevant"}:
                raise ValueError(f"{path.name}:{number}: expected keys id, folder, query, relevant")
            relevant = raw["relevant"]
            if not isinstance(relevant, dict) or not all(
                isinstance(k, str) and type(v) is int and v in GRADES for k, v in relevant.items()
            ):
                raise ValueError(f"{path.name}:{number}: relevant must map page ids to 1 or 2")
            for key in ("id", "folder", "query"):
                if not isinstance(raw[key], str) or not raw[key].strip():
                    raise ValueError(f"{path.name}:{number}: {key} must be a non-empty string")
            out.append(Judgement(id=raw["id"], folder=raw["folder"], query=raw["query"],
                                 relevant=dict(relevant), set_name=set_name,
                                 slice=slice_of(set_name, raw["id"])))
    return out


# -- metrics (pure) ---------------------------------------------------------------------


def _top(ranked_ids: Sequence[str], k: int) -> list[str | None]:
    """The first k ranks; a repeated id keeps its rank but gains nothing (None)."""
    seen: set[str] = set()
    out: list[str | None] = []
    for pid in ranked_ids[:k]:
        out.append(None if pid in seen else pid)
        seen.add(pid)
    return out


def dcg_at_k(ranked_ids: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """Graded DCG: gain 2^g - 1, discount log2(rank + 1); a repeated id gains nothing."""
    return sum((2.0 ** relevant.get(pid, 0) - 1.0) / math.log2(rank + 2)
               for rank, pid in enumerate(_top(ranked_ids, k)) if pid is not None)


def ndcg_at_k(ranked_ids: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k in [0, 1]; 0.0 when nothing is relevant (leak queries are scored apart)."""
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum((2.0 ** g - 1.0) / math.log2(rank + 2) for rank, g in enumerate(ideal))
    if idcg <= 0.0:
        return 0.0
    return dcg_at_k(ranked_ids, relevant, k) / idcg


def recall_at_k(ranked_ids: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """Share of the relevant pages (any grade) found in the top k; 0.0 when none exist."""
    wanted = {pid for pid, g in relevant.items() if g > 0}
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranked_ids[:k])) / len(wanted)


def answer_in_top(ranked_ids: Sequence[str], relevant: Mapping[str, int], k: int) -> bool:
    """Whether an answering page (grade 2) is among the first k distinct ids."""
    return any(pid is not None and relevant.get(pid, 0) == 2 for pid in _top(ranked_ids, k))


def mrr_at_k(ranked_ids: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant page (any grade) in the top k, else 0.0."""
    for rank, pid in enumerate(ranked_ids[:k], 1):
        if relevant.get(pid, 0) > 0:
            return 1.0 / rank
    return 0.0


@dataclass(frozen=True)
class QueryScore:
    """One query's ranking and figures."""

    judgement: Judgement
    ranked_ids: tuple[str, ...]
    ndcg: float
    recall: float
    mrr: float
    extra: dict[str, object] = field(default_factory=dict)


SearchFn = Callable[[Judgement], Sequence[str]]


def score_queries(search_fn: SearchFn, judgements: Iterable[Judgement], k: int = 10) -> list[QueryScore]:
    """Run every query through ``search_fn`` (which returns ranked page ids) and score it."""
    scores: list[QueryScore] = []
    for j in judgements:
        ranked = tuple(search_fn(j))
        scores.append(QueryScore(j, ranked, ndcg_at_k(ranked, j.relevant, k),
                                 recall_at_k(ranked, j.relevant, k), mrr_at_k(ranked, j.relevant, k)))
    return scores


def summarize(scores: Iterable[QueryScore], k: int = 10) -> dict[str, dict[str, float | int]]:
    """Means per ``set/slice`` and per ``set/all``. Leak queries are not scored: they
    appear as ``set/leak`` with only their count (check them with ``leaked_ids``)."""
    groups: dict[str, list[QueryScore]] = defaultdict(list)
    leaks: Counter[str] = Counter()
    for s in scores:
        j = s.judgement
        if j.is_leak:
            leaks[j.set_name] += 1
            continue
        groups[f"{j.set_name}/{j.slice}"].append(s)
        groups[f"{j.set_name}/all"].append(s)
    out: dict[str, dict[str, float | int]] = {}
    for key in sorted(groups, key=lambda g: (g.split("/")[0], g.endswith("/all"), g)):
        items = groups[key]
        out[key] = {
            "queries": len(items),
            f"ndcg@{k}": fmean(s.ndcg for s in items),
            f"recall@{k}": fmean(s.recall for s in items),
            f"mrr@{k}": fmean(s.mrr for s in items),
        }
    for set_name, count in sorted(leaks.items()):
        out[f"{set_name}/{LEAK}"] = {"queries": count}
    return out


Summary = dict[str, dict[str, float | int]]


def evaluate(search_fn: SearchFn, judgements: Iterable[Judgement], k: int = 10) -> Summary:
    """Mean nDCG@k, Recall@k and MRR@k per judged set and slice (see ``summarize``)."""
    return summarize(score_queries(search_fn, judgements, k), k)


def service_search_ids(source: Any, query: str, limit: int = 10) -> list[str]:
    """Ranked page ids from a ``serve.service.KnowledgeSource`` (duck-typed; the one place
    to adapt when the search API changes): ``search(request(query=..., limit=...))`` when
    the source builds SearchRequests, else ``search(query, limit=...)``."""
    make_request = getattr(source, "request", None)
    search = source.search
    payload = (search(make_request(query=query, limit=limit)) if callable(make_request)
               else search(query, limit=limit))
    results = (payload["results"] if isinstance(payload, dict)
               else getattr(payload, "results", payload))
    return [r["page_id"] if isinstance(r, dict) else r.page_id for r in results]


def leaked_ids(ranked_ids: Iterable[str], approved_ids: Iterable[str]) -> list[str]:
    """Returned page ids that are not approved pages (must be empty)."""
    approved = set(approved_ids)
    return [pid for pid in ranked_ids if pid not in approved]


# -- folders and the tldr corpus ---------------------------------------------------------


def tldr_tarball() -> Path | None:
    """The corpus tarball, or None when this checkout has no ``../shared/corpora``."""
    return TLDR_TARBALL if TLDR_TARBALL.is_file() else None


def corpora_required() -> bool:
    """Whether this run must have the corpora (CI), so that tests fail instead of skipping."""
    return os.environ.get(REQUIRE_CORPORA_ENV, "") not in ("", "0")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def default_cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llmwiki-serve-tests" / "tldr"


def extract_tldr(dest: Path | None = None, tarball: Path | None = None) -> Path | None:
    """Extract the tldr corpus and return its served root (``<dir>/tldr``), or None when
    the tarball is missing (callers skip).

    Without ``dest`` the corpus goes to ``~/.cache/llmwiki-serve-tests/tldr/<sha256[:16]>``
    (or ``$LLMWIKI_SERVE_TEST_CACHE/<sha256[:16]>``) and is reused while the tarball is
    unchanged. Never extract into the repository. Page ids under the returned root are
    ``pages/<platform>/<name>`` and ``pages.ko/<platform>/<name>`` (plus ``LICENSE``)."""
    tarball = tarball or tldr_tarball()
    if tarball is None or not tarball.is_file():
        return None
    if dest is None:
        dest = default_cache_dir() / file_sha256(tarball)[:16]
    return extract_once(tarball, Path(dest), "tldr")


def extract_once(tarball: Path, dest: Path, top: str) -> Path:
    """Unpack `tarball` (whose top directory is `top`) into `dest` once, staged so that a
    concurrent or interrupted run never sees half of it; `dest/top`. Never into the repository."""
    if dest.resolve().is_relative_to(REPO):
        raise ValueError(f"refusing to extract {tarball.name} inside the repository: {dest}")
    root = dest / top
    marker = dest / ".extracted"
    if marker.is_file() and root.is_dir():
        return root
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=dest))
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            if hasattr(tarfile, "data_filter"):
                archive.extractall(staging, filter="data")
            else:  # Python before 3.11.4 has no extraction filters: plain members only
                archive.extractall(staging, members=_plain_members(archive))
        if not root.is_dir():  # another process may have won the race meanwhile
            os.replace(staging / top, root)
        marker.write_text(file_sha256(tarball) + "\n", encoding="utf-8")
    finally:
        _rmtree(staging)
    return root


def _plain_members(archive: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Files and directories with relative names that stay inside the destination."""
    plain = []
    for member in archive.getmembers():
        parts = Path(member.name).parts
        if (member.isfile() or member.isdir()) and not Path(member.name).is_absolute() and ".." not in parts:
            plain.append(member)
    return plain


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def resolve_folder(folder: str, tldr_root: Path | None = None) -> Path:
    """Filesystem root of a judged folder: a fixture folder or the extracted corpus."""
    if folder == TLDR_FOLDER:
        if tldr_root is None:
            raise FileNotFoundError("the tldr corpus is not extracted (see extract_tldr)")
        return tldr_root
    if folder.startswith("corpus:"):
        raise ValueError(f"unknown corpus folder: {folder}")
    path = (FIXTURES / folder).resolve()
    if not path.is_relative_to(FIXTURES.resolve()) or not path.is_dir():
        raise FileNotFoundError(f"unknown fixture folder: {folder}")
    return path


# -- tldr known-item generation ------------------------------------------------------------

TLDR_MEMBER_RE = re.compile(r"^tldr/(pages|pages\.ko)/([^/]+)/([^/]+)\.md$")
LANGUAGE_OF_DIR = {"pages": "en", "pages.ko": "ko"}
# Description lines that are boilerplate, not a description of the command.
BOILERPLATE_RE = re.compile(r"^(more information|see also|더 많은 정보|관련 항목)\s*:", re.IGNORECASE)
# Alias pages ("This command is an alias of `x`.") describe another page: not known items.
ALIAS_RE = re.compile(r"\balias of\b|별칭", re.IGNORECASE)
BACKTICK_RE = re.compile(r"`[^`]*`")
MD_LINK_RE = re.compile(r"\[([^\]]*)\]\([^)]*\)")
ANGLE_URL_RE = re.compile(r"<[a-z][a-z0-9+.-]*:[^>\s]*>", re.IGNORECASE)
BARE_URL_RE = re.compile(r"\bhttps?://\S+", re.IGNORECASE)
BRACKETS_RE = re.compile(r"\[([^\]]*)\]")
EMPHASIS_RE = re.compile(r"\*+|(?<!\w)_+|_+(?!\w)|\{\{|\}\}")
EMPTY_PARENS_RE = re.compile(r"\(\s*[,.;:]?\s*\)")
SPACE_BEFORE_PUNCT_RE = re.compile(r"\s+([,.;:!?)])(?=\s|$)")
REPEATED_PUNCT_RE = re.compile(r"([,;:])(\s*[,;:.])+")
WORD_RE = re.compile(r"\w", re.UNICODE)
HANGUL_RE = re.compile(r"[\uac00-\ud7a3]")


def _name_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    variants = sorted({n.strip() for n in names if n.strip()}, key=len, reverse=True)
    if not variants:
        return None
    alternation = "|".join(re.escape(v) for v in variants)
    # ASCII-only boundaries: a Korean particle may directly follow a name ("tar는").
    return re.compile(rf"(?<![A-Za-z0-9_\-./])(?:{alternation})(?![A-Za-z0-9_\-]|\.[A-Za-z0-9])",
                      re.IGNORECASE)


def description_query(markdown: str, file_stem: str) -> str | None:
    """The known-item query of one tldr page: its ``>`` description without boilerplate
    lines (More information / See also), links, Markdown and the command name
    (case-insensitive; a backticked span containing the name is dropped whole, other
    backticked spans keep their text). None for alias pages and pages without one."""
    lines = markdown.splitlines()
    heading = next((ln[2:].strip() for ln in lines if ln.startswith("# ")), "")
    desc = [ln[1:].strip() for ln in lines if ln.startswith(">")]
    if not desc or any(ALIAS_RE.search(ln) for ln in desc):
        return None
    desc = [ln for ln in desc if ln and not BOILERPLATE_RE.match(ln)]
    text = " ".join(desc)
    names = {heading, file_stem, heading.replace(" ", "-"), file_stem.replace("-", " ")}
    pattern = _name_pattern(names)

    def code_span(match: re.Match[str]) -> str:
        inner = match.group(0)[1:-1]
        # A backticked span naming the command goes entirely; other spans lose the ticks.
        return " " if pattern is not None and pattern.search(inner) else inner

    text = MD_LINK_RE.sub(r"\1", text)
    text = ANGLE_URL_RE.sub(" ", text)
    text = BARE_URL_RE.sub(" ", text)
    text = BACKTICK_RE.sub(code_span, text)
    if pattern is not None:
        text = pattern.sub(" ", text)
    text = BRACKETS_RE.sub(r"\1", text)
    text = EMPHASIS_RE.sub(" ", text)
    text = EMPTY_PARENS_RE.sub(" ", text)
    text = " ".join(text.split())
    text = SPACE_BEFORE_PUNCT_RE.sub(r"\1", text)
    text = REPEATED_PUNCT_RE.sub(r"\1", text)
    text = text.strip(" ,;:-")
    return text or None


def word_count(text: str) -> int:
    return sum(1 for w in text.split() if WORD_RE.search(w))


def iter_tldr_pages(tarball: Path) -> Iterator[tuple[str, str, str, str]]:
    """(page_id, language, file_stem, markdown) for every command page, in name order."""
    with tarfile.open(tarball, "r:gz") as archive:
        members = sorted((m for m in archive.getmembers() if m.isfile()), key=lambda m: m.name)
        for member in members:
            match = TLDR_MEMBER_RE.match(member.name)
            if match is None:
                continue
            handle = archive.extractfile(member)
            if handle is None:
                continue
            markdown = handle.read().decode("utf-8", errors="replace")
            lang_dir, platform, stem = match.groups()
            yield f"{lang_dir}/{platform}/{stem}", LANGUAGE_OF_DIR[lang_dir], stem, markdown


def _rank_key(page_id: str) -> str:
    return hashlib.sha256(f"{TLDR_SEED}\0{page_id}".encode()).hexdigest()


def tldr_candidates(tarball: Path) -> dict[str, list[tuple[str, str]]]:
    """Eligible (page_id, query) pairs per language: a description of at least
    MIN_QUERY_WORDS words, Korean text for Korean pages, and a query no other page of the
    same language shares (an ambiguous known item has no single right answer)."""
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for page_id, lang, stem, markdown in iter_tldr_pages(tarball):
        query = description_query(markdown, stem)
        if query is None or word_count(query) < MIN_QUERY_WORDS:
            continue
        if lang == "ko" and not HANGUL_RE.search(query):
            continue
        found[lang].append((page_id, query))
    out: dict[str, list[tuple[str, str]]] = {}
    for lang, pairs in found.items():
        counts = Counter(q.casefold() for _, q in pairs)
        out[lang] = [(pid, q) for pid, q in pairs if counts[q.casefold()] == 1]
    return out


def build_tldr_judged(tarball: Path, per_language: int = TLDR_PER_LANGUAGE) -> list[dict[str, object]]:
    """The known-item set: ``per_language`` pages per language, chosen by a seeded hash of
    the page id (stable across Python versions), listed in page-id order."""
    candidates = tldr_candidates(tarball)
    rows: list[dict[str, object]] = []
    for lang in ("en", "ko"):
        pool = candidates.get(lang, [])
        if len(pool) < per_language:
            raise ValueError(f"only {len(pool)} eligible {lang} pages, need {per_language}")
        chosen = sorted(sorted(pool, key=lambda pair: _rank_key(pair[0]))[:per_language])
        for number, (page_id, query) in enumerate(chosen, 1):
            rows.append({"id": f"{lang}-{number:03d}", "folder": TLDR_FOLDER, "query": query,
                         "relevant": {page_id: 2}})
    return rows


def render_jsonl(rows: Iterable[Mapping[str, object]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.judged",
                                     description="Regenerate the tldr known-item judged set.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help=f"regenerate {TLDR_SET.relative_to(REPO)}")
    group.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    group.add_argument("--stdout", action="store_true", help="print the generated set")
    parser.add_argument("--tarball", type=Path, default=TLDR_TARBALL)
    args = parser.parse_args(argv)
    if not args.tarball.is_file():
        print(f"corpus tarball not found: {args.tarball}", file=sys.stderr)
        return 2
    text = render_jsonl(build_tldr_judged(args.tarball))
    if args.stdout:
        sys.stdout.write(text)
        return 0
    if args.check:
        current = TLDR_SET.read_text(encoding="utf-8") if TLDR_SET.is_file() else ""
        if current != text:
            print(f"{TLDR_SET.relative_to(REPO)} is stale: run python -m tests.support.judged --write",
                  file=sys.stderr)
            return 1
        print(f"{TLDR_SET.relative_to(REPO)} is up to date")
        return 0
    TLDR_SET.parent.mkdir(parents=True, exist_ok=True)
    TLDR_SET.write_text(text, encoding="utf-8")
    print(f"wrote {text.count(chr(10))} queries to {TLDR_SET.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
