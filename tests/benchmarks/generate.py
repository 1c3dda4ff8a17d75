"""Deterministic generator of a realistic LLMWiki folder for benchmarks (stdlib only).

    python -m tests.benchmarks.generate OUT_DIR --pages 20000 [--seed 7] [--force]

The folder has root hub pages (hot.md, index.md with wiki_title, overview.md) and pages
spread over about 100 nested folders. Every page has YAML frontmatter (title, tags,
source_refs, review_state, updated_at; about 3 % `draft: true`, about 1.5 % `status:
private`), 3-8 headings at several levels, 2-6 paragraphs (about 1.5-4 KB per page) mixing
English prose, code identifiers, versions and dates, Korean sentences on about 10 % of the
pages, inline #tags, 3-10 [[wikilinks]] (by id, by title, aliased, with anchors, a few
unresolved) and occasional Markdown links. graph/graph.json holds about 500 typed edges.

The same (pages, seed) always produces byte-identical files. `--pages` counts every .md
file, hub pages included.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

GRAPH_EDGES = 500
MIN_PAGES = 10

# -- vocabulary ---------------------------------------------------------------------------


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


WORDS = _words(
    "release pipeline artifact signing checksum installer package mirror registry build cache "
    "runner worker queue scheduler retry backoff timeout latency throughput budget quota limit "
    "token secret rotation credential vault policy audit review approval owner escalation "
    "incident outage rollback hotfix patch branch tag changelog migration schema index replica "
    "shard partition snapshot backup restore archive retention export import sync webhook "
    "endpoint gateway proxy certificate renewal domain region cluster node container image "
    "manifest deployment canary rollout feature flag experiment metric dashboard alert pager "
    "runbook playbook checklist template handbook guideline convention standard contract "
    "vendor customer invoice refund billing subscription plan tier discount ledger payout "
    "report analysis forecast roadmap milestone estimate dependency blocker risk mitigation "
    "storage bucket object lifecycle encryption key permission role group account tenant "
    "search ranking query filter facet document page section heading link graph neighbour "
    "onboarding training mentor interview hiring offsite planning retrospective postmortem"
)
GLUE = _words(
    "the a this that each every our their its any no one more less before after during while "
    "when until because so and but or if then also only still already never always usually"
)
VERBS = _words(
    "ships blocks triggers updates replaces validates signs uploads rotates tracks documents "
    "supersedes references requires restores monitors caches rebuilds publishes approves "
    "reviews exports imports retries schedules pauses drains promotes records summarises"
)
CODE_IDS = (
    "publish.yml", "release.yml", "ci.yml", "docker-compose.yml", "pyproject.toml", "Makefile",
    "REFUND_WINDOW_DAYS", "MAX_RETRY_COUNT", "DEFAULT_TIMEOUT_MS", "SIGNING_KEY_ID",
    "FEATURE_NEW_CHECKOUT", "EXPORT_BATCH_SIZE", "ExportJob.rotateToken", "ExportJob.run",
    "BillingClient.refund", "InvoiceService.finalize", "TokenStore.revoke", "Scheduler.tick",
    "ReleaseTrain.cut", "ArtifactSigner.verify", "sync_customer_ledger", "rotate_api_keys",
    "build_release_notes", "compute_refund_amount", "load_feature_flags", "purge_stale_cache",
    "retry_with_backoff", "export_daily_report", "validate_manifest", "POST /v1/exports",
    "GET /v2/invoices/{id}", "kubectl rollout undo", "git tag -s", "terraform plan",
    "pg_dump --format=custom", "X-Request-Id", "ERR_QUOTA_EXCEEDED", "HTTP 429",
)
KOREAN = (
    "배포 전에 변경 기록과 서명 여부를 반드시 확인합니다.",
    "환불 기간은 결제일로부터 삼십 일이며 예외는 재무팀 승인이 필요합니다.",
    "장애가 발생하면 먼저 롤백하고 원인은 사후 검토에서 분석합니다.",
    "토큰 교체는 분기마다 진행하며 만료 하루 전에 알림이 발송됩니다.",
    "이 문서는 운영팀이 관리하며 변경 사항은 검토 후 반영됩니다.",
    "고객사에는 배포 하루 전에 일정을 알려야 합니다.",
    "빌드 캐시가 오래되면 설치 파일 크기가 비정상적으로 커질 수 있습니다.",
    "데이터 내보내기 작업은 매일 새벽 세 시에 실행됩니다.",
    "권한 변경은 보안 검토를 거친 뒤에만 적용할 수 있습니다.",
    "새로운 기능 플래그는 카나리 배포로 먼저 검증합니다.",
    "검색 색인은 문서가 바뀔 때마다 다시 만들어집니다.",
    "회의록은 회의가 끝난 당일에 공유하는 것을 원칙으로 합니다.",
)
KOREAN_TITLES = (
    "배포 체크리스트", "환불 정책", "장애 대응 절차", "토큰 교체 가이드", "운영 개요",
    "빌드 캐시 정리", "데이터 내보내기", "권한 관리", "기능 플래그 운영", "검색 색인",
    "회의록 작성법", "서명 키 관리", "릴리스 일정", "고객 공지 템플릿", "모니터링 지표",
)
TAGS = (
    "release", "ops", "security", "billing", "runbook", "incident", "design", "decision",
    "meeting", "onboarding", "data", "search", "infra", "ci", "vendor", "roadmap", "metrics",
    "api", "cli", "deprecated", "needs-owner", "q3-planning", "v2-migration", "postmortem",
)
KOREAN_TAGS = ("릴리스", "운영", "보안", "환불", "장애", "회의")
RELATIONS = (
    "supports", "depends_on", "supersedes", "documents", "tracks", "Related To",
    "contradicts", "implements", "owned-by", "cites",
)
REVIEW_STATES = ("approved", "reviewed", "verified", "needs_review", "unknown")
REVIEW_WEIGHTS = (78, 10, 8, 1, 3)
TEAMS = ("platform", "payments", "search", "mobile", "data", "security", "growth", "support",
         "infra", "design")
PROJECTS = ("atlas", "beacon", "cobalt", "delta", "ember", "falcon", "granite", "harbor",
            "iris", "juniper", "kestrel", "lumen")
SRC_PREFIXES = ("SRC-OPS", "SRC-REL", "SRC-SEC", "SRC-FIN", "SRC-ENG", "RFC", "ADR")


def folders() -> list[str]:
    """About 100 nested page folders (root-relative, no trailing slash)."""
    dirs = [
        "concepts", "concepts/security", "concepts/release", "concepts/data",
        "entities", "entities/vendors", "entities/services", "entities/people",
        "runbooks", "runbooks/incidents", "runbooks/deploy", "runbooks/data",
        "sources", "sources/papers", "sources/meetings", "queries", "comparisons", "synthesis",
        "reference", "reference/api", "reference/cli", "reference/config",
        "ko", "ko/guides", "ko/runbooks", "ko/glossary",
        "archive", "archive/2023", "archive/2024",
    ]
    dirs += [f"archive/{year}/q{q}" for year in (2023, 2024) for q in range(1, 5)]
    dirs.append("projects")
    for i, name in enumerate(PROJECTS):
        dirs.append(f"projects/{name}")
        if i % 2 == 0:
            dirs.append(f"projects/{name}/design")
    dirs.append("teams")
    for team in TEAMS:
        dirs.append(f"teams/{team}")
        dirs += [f"teams/{team}/{sub}" for sub in ("notes", "decisions", "meetings")]
    return dirs


# -- planning -----------------------------------------------------------------------------


@dataclass(slots=True)
class PagePlan:
    path: str  # root-relative, with .md
    title: str
    korean: bool
    headings: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.path[:-3]


def _slugify(words: list[str]) -> str:
    return re.sub(r"[^a-z0-9]+", "-", " ".join(words).lower()).strip("-")


def _plan(rng: random.Random, count: int) -> list[PagePlan]:
    dirs = folders()
    korean_dirs = [d for d in dirs if d.startswith("ko")]
    used_paths: set[str] = set()
    used_titles: set[str] = set()
    plans: list[PagePlan] = []
    for n in range(count):
        korean = rng.random() < 0.10
        folder = rng.choice(korean_dirs if korean and rng.random() < 0.5 else dirs)
        words = [w.capitalize() for w in rng.sample(WORDS, rng.randint(2, 4))]
        if korean and rng.random() < 0.6:
            title = f"{rng.choice(KOREAN_TITLES)} {' '.join(words[:1])}"
        else:
            title = " ".join(words)
            if rng.random() < 0.08:
                title += f" {rng.choice(('v1.2.3', 'v2.0.0', '2024 Q3', 'Phase 2', 'FAQ'))}"
        if title in used_titles:
            title = f"{title} {n}"
        used_titles.add(title)
        stem = _slugify(words)
        path = f"{folder}/{stem}.md"
        if path in used_paths:
            path = f"{folder}/{stem}-{n}.md"
        used_paths.add(path)
        plans.append(PagePlan(path, title, korean))
    return plans


# -- rendering ----------------------------------------------------------------------------


def _date(rng: random.Random) -> dt.date:
    return dt.date(2022, 1, 1) + dt.timedelta(days=rng.randrange(0, 1460))


def _token(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.06:
        return f"`{rng.choice(CODE_IDS)}`"
    if roll < 0.08:
        return f"v{rng.randint(0, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 30)}"
    if roll < 0.095:
        return _date(rng).isoformat()
    if roll < 0.11:
        return f"{rng.choice(('GH', 'OPS', 'SEC', 'PAY'))}-{rng.randint(10, 9999)}"
    if roll < 0.35:
        return rng.choice(GLUE)
    if roll < 0.45:
        return rng.choice(VERBS)
    return rng.choice(WORDS)


def _sentence(rng: random.Random, korean: bool) -> str:
    if korean and rng.random() < 0.45:
        return rng.choice(KOREAN)
    words = [_token(rng) for _ in range(rng.randint(8, 18))]
    if words[0].isalpha():
        words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice((".", ".", ".", ";", ":", "?"))


def _link(rng: random.Random, plans: list[PagePlan], me: int, unresolved: int) -> str:
    roll = rng.random()
    if roll < 0.04:
        return f"[[Missing Topic {unresolved}]]"
    if roll < 0.06:
        return f"[[GH-{rng.randint(1, 999)}]]"
    target = plans[rng.randrange(len(plans))]
    if target is plans[me]:
        target = plans[(me + 1) % len(plans)]
    if roll < 0.62:
        return f"[[{target.id}]]"
    if roll < 0.82:
        return f"[[{target.title}]]"
    if roll < 0.92:
        return f"[[{target.id}|{' '.join(rng.sample(WORDS, 2))}]]"
    anchor = target.headings[1] if len(target.headings) > 1 else target.title
    return f"[[{target.id}#{anchor}]]"


def _yaml_str(value: str) -> str:
    plain = re.fullmatch(r"[A-Za-z\uac00-\ud7a3][A-Za-z0-9\uac00-\ud7a3 .\-]*", value)
    if plain and value.lower() not in ("yes", "no", "true", "false", "on", "off", "null"):
        return value
    return json.dumps(value, ensure_ascii=False)


def _frontmatter(rng: random.Random, plan: PagePlan) -> list[str]:
    tags = rng.sample(TAGS, rng.randint(1, 4))
    if plan.korean and rng.random() < 0.5:
        tags.append(rng.choice(KOREAN_TAGS))
    refs = sorted({f"{rng.choice(SRC_PREFIXES)}-{rng.randint(1, 400):03d}"
                   for _ in range(rng.randint(0, 3))})
    lines = ["---", f"title: {_yaml_str(plan.title)}"]
    if rng.random() < 0.5:
        lines.append(f"tags: [{', '.join(tags)}]")
    else:
        lines.append("tags:")
        lines += [f"  - {t}" for t in tags]
    if refs:
        lines.append("source_refs:")
        lines += [f"  - {r}" for r in refs]
    state = rng.choices(REVIEW_STATES, REVIEW_WEIGHTS)[0]
    if state != "unknown":
        lines.append(f"review_state: {state}")
    lines.append(f"updated_at: {_date(rng).isoformat()}")
    roll = rng.random()
    if roll < 0.03:
        lines.append("draft: true")
    elif roll < 0.045:
        lines.append("status: private")
    elif roll < 0.35:
        lines.append(f"status: {rng.choice(('active', 'stable', 'published', 'current'))}")
    if rng.random() < 0.2:
        lines.append(f"owner: {rng.choice(TEAMS)}")
    lines.append("---")
    return lines


def _render_page(rng: random.Random, plans: list[PagePlan], me: int) -> str:
    plan = plans[me]
    lines = _frontmatter(rng, plan)
    target_bytes = rng.randint(1200, 3600)  # body; frontmatter and headings add ~400 B
    n_paragraphs = rng.randint(2, 6)
    n_headings = len(plan.headings)
    links = [_link(rng, plans, me, me * 7 + i) for i in range(rng.randint(3, 10))]
    md_links = []
    if rng.random() < 0.25:
        other = plans[rng.randrange(len(plans))]
        md_links.append(f"[{other.title}]({other.path})")
    inline_tags = [f"#{t}" for t in rng.sample(TAGS, rng.randint(0, 3))]
    if plan.korean and rng.random() < 0.4:
        inline_tags.append(f"#{rng.choice(KOREAN_TAGS)}")
    # Headings: the page title (level 1), then sub-headings at levels 2-4.
    levels = [1] + [rng.choice((2, 2, 2, 3, 3, 4)) for _ in range(n_headings - 1)]
    # Paragraph slots: after heading i; every paragraph belongs to some heading.
    slots = sorted(rng.randrange(n_headings) for _ in range(n_paragraphs))
    per_paragraph = max(200, target_bytes // n_paragraphs - 60)
    extras = links + md_links + inline_tags
    rng.shuffle(extras)
    body: list[str] = []
    for h in range(n_headings):
        body.append("")
        body.append(f"{'#' * levels[h]} {plan.headings[h]}")
        for _ in range(slots.count(h)):
            text: list[str] = []
            size = 0
            while size < per_paragraph:
                sentence = _sentence(rng, plan.korean)
                if extras and rng.random() < 0.3:
                    sentence = f"{sentence[:-1]} {extras.pop()}{sentence[-1]}"
                text.append(sentence)
                size += len(sentence.encode("utf-8")) + 1
            body.append("")
            if rng.random() < 0.15:
                body += [f"- {s}" for s in text]
            else:
                body.append(" ".join(text))
    if extras:  # whatever did not land inside prose goes into a "See also" line
        body.append("")
        body.append("See also: " + ", ".join(extras))
    return "\n".join(lines + body) + "\n"


def _plan_headings(rng: random.Random, plans: list[PagePlan]) -> None:
    for plan in plans:
        n = rng.randint(3, 8)
        heads = [plan.title]
        for _ in range(n - 1):
            if plan.korean and rng.random() < 0.3:
                heads.append(rng.choice(KOREAN_TITLES))
            else:
                heads.append(" ".join(w.capitalize() for w in rng.sample(WORDS, rng.randint(1, 3))))
        plan.headings = heads


def _hub_pages(rng: random.Random, plans: list[PagePlan], wiki_title: str) -> dict[str, str]:
    today = dt.date(2026, 1, 15).isoformat()
    hot_links = "\n".join(f"- [[{p.id}]]: {_sentence(rng, False)}"
                          for p in rng.sample(plans, min(20, len(plans))))
    index_sections: list[str] = []
    by_top: dict[str, list[PagePlan]] = {}
    for p in plans:
        by_top.setdefault(p.path.split("/", 1)[0], []).append(p)
    for top in sorted(by_top):
        index_sections.append(f"\n## {top.capitalize()}\n")
        index_sections += [f"- [[{p.id}]]" for p in by_top[top][:8]]
    overview_links = ", ".join(f"[[{p.title}]]" for p in rng.sample(plans, min(12, len(plans))))
    return {
        "hot.md": (
            f"---\ntitle: Current Focus\nreview_state: approved\nupdated_at: {today}\n"
            "source_refs:\n  - SRC-REL-001\ntags: [release, focus]\n---\n"
            "# Current Focus\n\nThis week the team ships **v1.2.3**; `publish.yml` picks up the "
            "new signing key. #release\n\n## Open Items\n\n" + hot_links + "\n\n## Watch List\n\n"
            "Linux packages build slowly; see [[overview]] and [[index]].\n"
        ),
        "index.md": (
            f"---\nwiki_title: {wiki_title}\ndescription: Generated benchmark wiki with "
            f"{len(plans) + 3} pages.\nreview_state: approved\nupdated_at: {today}\n"
            "source_refs:\n  - SRC-OPS-INDEX\n---\n"
            f"# {wiki_title}\n\n## Start Here\n\n- [[hot]]: what the team works on now.\n"
            "- [[overview]]: how the wiki is organised.\n" + "\n".join(index_sections) + "\n"
        ),
        "overview.md": (
            f"---\ntitle: Wiki Overview\nreview_state: approved\nupdated_at: {today}\n"
            "tags:\n  - meta\n---\n# Wiki Overview\n\nRoot pages describe the process, "
            "`concepts/` the ideas, `runbooks/` the procedures and `teams/` each team's notes. "
            "#operations\n\n## Ownership\n\nThe release captain keeps [[hot]] current.\n\n"
            f"## Highlights\n\n{overview_links}\n\n## 한국어 문서\n\n{KOREAN[4]} [[ko]]\n"
        ),
    }


def _graph(rng: random.Random, plans: list[PagePlan]) -> str:
    edges = []
    for _ in range(GRAPH_EDGES):
        a, b = rng.sample(plans, 2)
        src = a.id if rng.random() < 0.8 else a.title
        dst = b.id if rng.random() < 0.8 else b.title
        if rng.random() < 0.03:
            dst = f"{rng.choice(('GH', 'OPS'))}-{rng.randint(1, 999)}"
        edge: dict[str, object] = ({"from": src, "to": dst} if rng.random() < 0.7
                                   else {"source": src, "target": dst})
        edge["type"] = rng.choice(RELATIONS)
        if rng.random() < 0.8:
            edge["confidence"] = round(rng.uniform(0.4, 0.99), 2)
        edges.append(edge)
    return json.dumps({"edges": edges}, ensure_ascii=False, indent=1) + "\n"


def generate(out: Path, pages: int, seed: int = 7) -> None:
    """Write a wiki of `pages` .md files (hubs included) into `out` (absent or empty)."""
    if pages < MIN_PAGES:
        raise ValueError(f"pages must be at least {MIN_PAGES}")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    rng = random.Random(f"llmwiki-bench:{seed}")
    plans = _plan(rng, pages - 3)
    _plan_headings(rng, plans)
    out.mkdir(parents=True, exist_ok=True)
    for folder in {p.path.rsplit("/", 1)[0] for p in plans} | set(folders()) | {"graph"}:
        (out / folder).mkdir(parents=True, exist_ok=True)
    files = _hub_pages(rng, plans, f"Benchmark Operations Wiki {pages}")
    for name, text in files.items():
        (out / name).write_bytes(text.encode("utf-8"))
    for i, plan in enumerate(plans):
        with open(out / plan.path, "wb") as handle:
            handle.write(_render_page(rng, plans, i).encode("utf-8"))
    (out / "graph" / "graph.json").write_bytes(_graph(rng, plans).encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.generate",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, metavar="OUT_DIR")
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--force", action="store_true", help="replace OUT_DIR if it exists")
    args = parser.parse_args(argv)
    if args.force and args.out.exists():
        shutil.rmtree(args.out)
    started = time.perf_counter()
    try:
        generate(args.out, args.pages, args.seed)
    except (ValueError, FileExistsError) as exc:
        parser.error(str(exc))
    total = sum(f.stat().st_size for f in args.out.rglob("*.md"))
    dirs = sum(1 for _ in os.walk(args.out)) - 1
    sys.stdout.write(f"wrote {args.pages} pages ({total / 1e6:.1f} MB) in {dirs} folders to "
                     f"{args.out} in {time.perf_counter() - started:.1f} s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
