"""One projected page: parsing a file's text into a Page with fields and raw origins."""

from __future__ import annotations

import json
import re
import zlib
from typing import Any, NamedTuple

from serve.source.frontmatter import json_safe, split_frontmatter

HEADING_RE = re.compile(r"^(#{1,6})\s+(.+?)\s*$", re.MULTILINE)
HEADING_PREFIX_RE = re.compile(r"^#{1,6}\s+", re.MULTILINE)
WHITESPACE_RE = re.compile(r"\s+")
# The '#' must not follow a word character or '/'; checked by hand because a leading
# look-behind makes the regex engine test it at every position of the body.
INLINE_TAG_RE = re.compile(r"#([A-Za-z0-9\uac00-\ud7a3][A-Za-z0-9\uac00-\ud7a3_./-]*)")
WORD_CHAR_RE = re.compile(r"[\w/]")
LOGSEQ_TAGS_RE = re.compile(r"^[ \t]*tags::(.*)$", re.MULTILINE | re.IGNORECASE)
WIKILINK_RE = re.compile(r"\[\[([^\]]*)\]\]")
MDLINK_RE = re.compile(r"\[([^\]]+)\]\(([^)]+?\.(?:md|org)(?:#[^)]*)?)\)")

MAX_HEADINGS = 40
SUMMARY_CHARS = 360
REVIEW_STATES = frozenset({"approved", "reviewed", "verified", "draft", "proposed", "needs_review"})
WITHHELD_REVIEW_STATES = frozenset({"draft", "proposed", "needs_review"})
WITHHELD_STATUSES = frozenset(
    {
        "draft",
        "proposed",
        "needs_review",
        "blocked",
        "unpublished",
        "private",
        "hidden",
        "embargoed",
        "confidential",
        "internal",
        "withheld",
    }
)
TRUE_WORDS = frozenset({"1", "true", "yes", "y", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "n", "off"})
ROLE_RANK = {"hot": 0, "index": 1, "overview": 2, "topic": 3}


class Section(NamedTuple):
    """Where one heading's section sits in the file (1-based, inclusive line numbers)."""

    heading: str
    level: int
    start_line: int
    end_line: int


class ParseOptions(NamedTuple):
    """Adapter-dependent parsing choices (part of the page cache key)."""

    alias_target_last: bool = False  # Dendron: [[Alias|target]]
    logseq_titles: bool = False  # Logseq: '___' in a file stem means '/'


class Page(NamedTuple):
    """A parsed page. Immutable; `role` is assigned by the loader from the page's location.

    A NamedTuple (not a dataclass) because tens of thousands are built, cached and
    restored at start-up, and tuples do that at C speed."""

    id: str
    title: str
    path: str
    role: str
    text_z: bytes  # the body text, zlib-compressed: most of a large folder's memory
    summary: str
    frontmatter_json: str  # JSON text: one object instead of a tree per page in memory
    review_state: str
    status: str
    source_refs: tuple[str, ...]
    tags: tuple[str, ...]
    links: tuple[str, ...]
    headings: tuple[str, ...]
    updated_at: str
    approved: bool
    line_count: int
    body_line: int
    sections: tuple[Section, ...] = ()
    wiki_title: str = ""
    description: str = ""
    degraded: str = ""  # why the page was degraded while parsing ("" when clean)

    @property
    def frontmatter(self) -> dict[str, Any]:
        """The parsed frontmatter mapping, JSON-safe (dates as ISO strings)."""
        value: dict[str, Any] = json.loads(self.frontmatter_json)
        return value

    @property
    def text(self) -> str:
        """The body (after frontmatter), stripped; raw Markdown."""
        return zlib.decompress(self.text_z).decode("utf-8")

    def payload(self) -> dict[str, Any]:
        """The read payload (WikiPage), in wire order."""
        return {
            "id": self.id,
            "title": self.title,
            "path": self.path,
            "role": self.role,
            "text": self.text,
            "summary": self.summary,
            "frontmatter": self.frontmatter,
            "review_state": self.review_state,
            "status": self.status,
            "source_refs": list(self.source_refs),
            "tags": list(self.tags),
            "links": list(self.links),
            "headings": list(self.headings),
            "updated_at": self.updated_at,
            "okf": None,
        }


def collapse(text: str) -> str:
    """Collapse every whitespace run to one space and trim."""
    return " ".join(text.split())


def strip_page_suffix(value: str) -> str:
    lower = value.lower()
    if lower.endswith(".md") or lower.endswith(".org"):
        return value[: value.rfind(".")]
    return value


def page_id_from(value: str) -> str:
    return strip_page_suffix(value.strip().replace("\\", "/"))


def string_list(value: Any) -> list[str]:
    """Frontmatter list rule: a string is one item, a list is stringified, else nothing;
    collapsed, empties dropped, de-duplicated case-insensitively (first spelling kept)."""
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, list):
        items = [str(json_safe(v)) if not isinstance(v, str) else v for v in value]
    else:
        return []
    return dedupe_casefold(collapse(item) for item in items)


def dedupe_casefold(items: Any) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if not item:
            continue
        key = item.casefold()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def is_truthy(value: Any) -> bool:
    if value is True:
        return True
    return isinstance(value, str) and value.strip().lower() in TRUE_WORDS


def is_falsy(value: Any) -> bool:
    if value is False:
        return True
    return isinstance(value, str) and value.strip().lower() in FALSE_WORDS


def normalized_status(status: str) -> str:
    return "_".join(status.lower().replace("-", " ").split())


def approved_for_serving(frontmatter: dict[str, Any], review_state: str, status: str) -> bool:
    """The contract's visibility rules: any withholding signal withholds the page."""
    if is_truthy(frontmatter.get("draft")):
        return False
    if is_falsy(frontmatter.get("published")) or is_falsy(frontmatter.get("publish")):
        return False
    if review_state in WITHHELD_REVIEW_STATES:
        return False
    return normalized_status(status) not in WITHHELD_STATUSES


def _scalar_text(value: Any) -> str:
    """Python-str rendering of a scalar (dates as str(date), as the reference does)."""
    if value is None:
        return ""
    return collapse(str(value))


def extract_tags(frontmatter_tags: Any, body: str) -> list[str]:
    inline = []
    for match in INLINE_TAG_RE.finditer(body):
        start = match.start()
        if start and WORD_CHAR_RE.match(body, start - 1):
            continue
        tag = match.group(1).rstrip(".,;:!?")
        if any(ch.isalpha() for ch in tag):
            inline.append(tag)
    logseq: list[str] = []
    for match in LOGSEQ_TAGS_RE.finditer(body):
        logseq.extend(part.strip("#") for part in match.group(1).replace(",", " ").split())
    items = [*string_list(frontmatter_tags), *inline, *logseq]
    return dedupe_casefold(collapse(t.lstrip("#")) for t in items)


def normalize_link(target: str) -> str:
    target = target.split("#", 1)[0].strip().replace("\\", "/")
    target = strip_page_suffix(target)
    if target.startswith("./"):
        target = target[2:]
    return target


def extract_links(body: str, *, alias_target_last: bool) -> list[str]:
    found: list[str] = []
    for match in WIKILINK_RE.finditer(body):
        content = match.group(1)
        if "|" in content:
            head, _, tail = content.partition("|")
            if alias_target_last:
                head, _, tail = content.rpartition("|")
                content = tail
            else:
                content = head
        found.append(normalize_link(content))
    for match in MDLINK_RE.finditer(body):
        found.append(normalize_link(match.group(2)))
    return dedupe_casefold(found)


def summarize(body: str) -> str:
    # Only the start of the body can reach the summary; work on a growing prefix that ends
    # at a line break, so heading markers and whitespace runs are handled as in the whole.
    size = 4 * SUMMARY_CHARS
    while True:
        cut = body.find("\n", size)
        head = body if cut < 0 else body[:cut]
        summary = collapse(HEADING_PREFIX_RE.sub("", head))
        if cut < 0 or len(summary) > SUMMARY_CHARS:
            break
        size *= 4
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1].rstrip() + "..."
    return summary


def review_state_of(frontmatter: dict[str, Any]) -> str:
    raw = frontmatter.get("review_state") or frontmatter.get("state")
    value = _scalar_text(raw).lower()
    return value if value in REVIEW_STATES else "unknown"


def parse_page(text: str, path: str, options: ParseOptions, *, degraded: str = "") -> Page:
    """Parse one file's text (already decoded) into a Page with role 'topic'."""
    split = split_frontmatter(text)
    fm = split.data
    if split.broken and not degraded:
        degraded = "frontmatter_invalid"
    body = split.body
    body_stripped = body.strip()

    # Headings with their file line numbers (raw origins for citations).
    line_count = text.count("\n") + (0 if text.endswith("\n") else 1) if text else 0
    raw_headings: list[tuple[str, int, int]] = []  # (text, level, line)
    line = split.body_line
    pos = 0
    for match in HEADING_RE.finditer(body):
        line += body.count("\n", pos, match.start(2))
        pos = match.start(2)
        raw_headings.append((collapse(match.group(2)), len(match.group(1)), line))
    headings = tuple(h[0] for h in raw_headings[:MAX_HEADINGS])
    sections = _sections(raw_headings, line_count)[:MAX_HEADINGS]

    stem = path.rsplit("/", 1)[-1]
    stem = stem[: stem.rfind(".")] if "." in stem else stem
    title_value = fm.get("title")
    if title_value not in (None, ""):
        title = collapse(str(json_safe(title_value)))
    elif raw_headings:
        title = raw_headings[0][0]
    else:
        fallback = stem.replace("-", " ")
        if options.logseq_titles:
            fallback = fallback.replace("___", "/")
        title = collapse(fallback)

    raw_id = fm.get("id")
    if raw_id in (None, ""):
        raw_id = fm.get("object_id")
    page_id = page_id_from(str(json_safe(raw_id)) if raw_id not in (None, "") else path)

    review_state = review_state_of(fm)
    status = _scalar_text(fm.get("status"))
    refs_value = fm.get("source_refs")
    if not refs_value:
        refs_value = fm.get("sources")
    source_refs = string_list(refs_value)
    updated = fm.get("updated_at")
    if updated in (None, ""):
        updated = fm.get("last_updated")
    description = fm.get("description")
    safe_fm = json_safe(fm)

    return Page(
        id=page_id,
        title=title,
        path=path,
        role="topic",
        text_z=zlib.compress(body_stripped.encode("utf-8"), 1),
        summary=summarize(body),
        frontmatter_json=json.dumps(safe_fm, ensure_ascii=False, separators=(",", ":")),
        review_state=review_state,
        status=status,
        source_refs=tuple(source_refs),
        tags=tuple(extract_tags(fm.get("tags"), body)),
        links=tuple(extract_links(body, alias_target_last=options.alias_target_last)),
        headings=headings,
        updated_at=_scalar_text(updated),
        approved=approved_for_serving(fm, review_state, status),
        line_count=line_count,
        body_line=split.body_line,
        sections=sections,
        wiki_title=_scalar_text(fm.get("wiki_title")),
        description=str(json_safe(description)) if description else "",
        degraded=degraded,
    )


def _sections(headings: list[tuple[str, int, int]], line_count: int) -> tuple[Section, ...]:
    """A heading's section runs until the next heading of the same or a higher level."""
    out = []
    for i, (text, level, start) in enumerate(headings):
        end = line_count
        for _, other_level, other_start in headings[i + 1 :]:
            if other_level <= level:
                end = other_start - 1
                break
        out.append(Section(text, level, start, max(start, end)))
    return tuple(out)
