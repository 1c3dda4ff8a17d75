"""The text rules of retrieval guidance: sensitive text, safe paths, terms, identifiers, Markdown cleaning."""

from __future__ import annotations

import ipaddress
import posixpath
import re
import unicodedata
from collections.abc import Iterable, Iterator

from common.guidance import MAX_PATH_CHARS

MAX_TEXT_TERMS = 32

COMMON_WORDS = frozenset(
    ("about", "after", "also", "and", "are", "before", "between", "from", "for", "into",
     "markdown", "note", "notes", "page", "pages", "that", "the", "this", "wiki", "with")
)
STANDALONE_SENSITIVE = frozenset(
    ("authorization", "bearer", "client_secret", "credential", "credentials", "cookie", "password",
     "passwd", "private", "private_key", "secret", "session", "session_id", "token")
)

# A letter (not a digit or underscore), then 1-119 word characters or hyphens.
WORD_RE = re.compile(r"[^\W\d_][\w-]{1,119}")
# Alphanumeric runs joined by identifier connectors. Possessive quantifiers keep the scan
# linear: the run and connector classes are disjoint, so nothing needs backtracking.
IDENT_RE = re.compile(r"_*+[^\W_]++(?:[-_/.:@#]++[^\W_]++)*+")
CAMEL_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*+")
JOINED_RE = re.compile(r"[^\W_][-_/.:@#]++[^\W_]")

WIKILINK_RE = re.compile(r"\[\[([^\[\]\n|]*)(?:\|([^\[\]\n]*))?\]\]")
MDLINK_RE = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")
HTML_TAG_RE = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>]*>", re.DOTALL)
FENCE_PREFIXES = ("```", "~~~")
LINE_LEAD_CHARS = "-*0123456789. "

SENSITIVE_RE = re.compile(
    "|".join(
        (
            # credential keyword, optional plural, followed by ':' or '='
            r"(?i:(?<![a-z0-9])(?:authorization|passwords?|passwd|secrets?|api[ _-]?keys?"
            r"|access[ _-]?tokens?|bearers?|credentials?|cookies?|session[ _-]?ids?"
            r"|client[ _-]?secrets?|private[ _-]?keys?)\s*[:=])",
            r"(?i:\bbearer\s+[A-Za-z0-9\-._~+/]{12})",
            r"(?<![A-Za-z0-9])(?:sk-(?:proj-)?|ghp_|gho_|github_pat_|xox[baprs]-)[A-Za-z0-9_-]{12}",
            r"(?<![A-Z0-9])AKIA[0-9A-Z]{16}",
            r"(?i:\b(?:rediss?|file)://)",
            r"(?i:\b[a-z][a-z0-9+.-]*://[^\s/@?#]+@)",  # URL with userinfo
            r"(?i:\blocalhost\b)",
            r"(?<![A-Za-z0-9])[A-Za-z]:[\\/]",  # Windows drive path
            r"(?<!\S)\\\\[^\s\\]+\\",  # UNC share
            r"(?<![\w.~-])/(?:Users|home|root|var|tmp)(?![\w-])",
        )
    )
)
URL_HOST_RE = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://(?:[^\s/@?#]*@)?(\[[^\]\s]*\]|[^\s/?#:\[\]]+)")
DOTTED_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*+(?:\.[A-Za-z0-9-]++)++")
IPV4_RE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
PRIVATE_SUFFIXES = (".local", ".internal", ".corp", ".lan", ".localhost")
PRIVATE_PREFIXES = tuple(
    f"{word}{sep}" for word in ("internal", "intranet", "private", "vpn") for sep in ".-"
)
WORD_TOKEN_RE = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-(?:proj-)?|ghp_|gho_|github_pat_|xox[baprs]-)[A-Za-z0-9_-]{12}"
    r"|(?<![A-Z0-9])AKIA[0-9A-Z]{16}"
)
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
DRIVE_RE = re.compile(r"[A-Za-z]:")


# ---------------------------------------------------------------------------------------
# Text rules


def fold(value: str) -> str:
    """The uniqueness key of a list item: NFC, then casefold."""
    if value.isascii():  # NFC never changes ASCII; this is the common case by far
        return value.casefold()
    return unicodedata.normalize("NFC", value).casefold()


def trim(text: str, limit: int) -> str:
    """Collapse whitespace; past `limit`, keep the first limit-3 chars (right-stripped) + '...'."""
    text = " ".join(text.split())
    if len(text) > limit:
        return text[: limit - 3].rstrip() + "..."
    return text


def _private_host(host: str, *, bare: bool) -> bool:
    host = host.casefold().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        try:
            return not ipaddress.IPv6Address(host[1:-1].split("%")[0]).is_global
        except ValueError:
            return True  # an unparseable bracketed host is not worth the risk
    if IPV4_RE.fullmatch(host):
        try:
            return not ipaddress.IPv4Address(host).is_global
        except ValueError:
            return False
    if host == "localhost" or host.endswith(PRIVATE_SUFFIXES):
        return True
    # A bare dotted word such as `internal-tools.md` is more likely a file than a host; in
    # running text only call it a host when it has at least two dots.
    return host.startswith(PRIVATE_PREFIXES) and (not bare or host.count(".") >= 2)


def is_sensitive(text: str) -> bool:
    """True when the text holds a credential, a private address, a local path or is itself a
    sensitive word; such text never reaches guidance."""
    if not text:
        return False
    if _standalone_sensitive(text) or SENSITIVE_RE.search(text):
        return True
    if "://" in text:
        for match in URL_HOST_RE.finditer(text):
            if _private_host(match.group(1), bare=False):
                return True
    if "." in text:
        for match in DOTTED_RE.finditer(text):
            # A dotted quad anywhere (`127.0.0.1:8080/x` without its scheme) is checked too.
            quad = IPV4_RE.search(match.group())
            if quad and _private_host(quad.group(), bare=True):
                return True
            if _private_host(match.group(), bare=True):
                return True
    return False


def _standalone_sensitive(text: str) -> bool:
    key = text.strip().casefold().replace("-", "_").replace(" ", "_")
    return key in STANDALONE_SENSITIVE


def _sensitive_word(word: str) -> bool:
    # A word holds only word characters and '-', so of the sensitive-text rules only the
    # standalone words, `localhost` and the token prefixes can match inside it.
    return _standalone_sensitive(word) or word.casefold() == "localhost" or bool(WORD_TOKEN_RE.search(word))


def terms_from_text(text: str, limit: int = MAX_TEXT_TERMS) -> list[str]:
    """Distinct words of a text (first spelling kept), minus common and sensitive words."""
    if not text or is_sensitive(text):
        return []
    if not text.isascii():
        # A decomposed accent is not a word character; composing first keeps `CAFE\u0301` whole.
        text = unicodedata.normalize("NFC", text)
    terms: list[str] = []
    seen: set[str] = set()
    for match in WORD_RE.finditer(text):
        # A trailing hyphen ("pre-") is line-wrap or prose debris, not part of the term.
        word = match.group().rstrip("-")
        if len(word) < 2:
            continue
        key = fold(word)
        if key in seen or key in COMMON_WORDS or _sensitive_word(word):
            continue
        seen.add(key)
        terms.append(word)
        if len(terms) >= limit:
            break
    return terms


def identifiers_in(*texts: str) -> list[str]:
    """Exact identifiers in the texts, in order: connector-joined runs (`pkg.mod`, `a:b`,
    `artwork-review`, `refund.v1-beta.md`, `v1.2`, `ABC-123`, `REFUND_WINDOW_DAYS`) and ASCII
    words with an uppercase letter after the first char (`LLMWiki`, `BillingRefundHandler`)."""
    found: list[str] = []
    for text in texts:
        for match in IDENT_RE.finditer(text):
            token = match.group()
            core = token.strip("_")
            if JOINED_RE.search(core) or (
                CAMEL_RE.fullmatch(token) and any("A" <= c <= "Z" for c in token[1:])
            ):
                found.append(token)
    return found


def unfenced_lines(lines: Iterable[str]) -> Iterator[str]:
    """Each line stripped, those of fenced code blocks (and the fences) left out."""
    in_fence = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith(FENCE_PREFIXES):
            in_fence = not in_fence
        elif not in_fence:
            yield stripped


def clean_markdown(text: str) -> str:
    """Markdown inline cleaning (contract 5.8), whitespace collapsed, not yet trimmed."""
    if "[[" in text:
        text = WIKILINK_RE.sub(lambda m: m.group(2) if m.group(2) is not None else m.group(1), text)
    if "](" in text:
        text = MDLINK_RE.sub(r"\1", text)
    if "<" in text:
        text = HTML_TAG_RE.sub(" ", text)
    parts: list[str] = []
    for line in unfenced_lines(text.splitlines()):
        stripped = line.lstrip("#").lstrip(LINE_LEAD_CHARS)
        if not stripped or stripped.startswith("|"):
            continue
        parts.append(stripped)
    return " ".join(" ".join(parts).split())


def safe_path(value: str) -> str | None:
    """The source-relative `/` path when it is safe to show an agent, else None."""
    path = value.strip().replace("\\", "/")
    if (
        not path
        or len(path) > MAX_PATH_CHARS
        or path.startswith("/")
        or "://" in path
        or CONTROL_RE.search(path)
        or DRIVE_RE.match(path)
        or is_sensitive(path)
    ):
        return None
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            return None
        if _standalone_sensitive(posixpath.splitext(segment)[0]):
            return None
    return path


def unique(items: Iterable[str], limit: int, max_chars: int | None = None) -> list[str]:
    """Stripped, non-empty, case-insensitively unique items (first spelling kept), capped."""
    out: list[str] = []
    seen: set[str] = set()
    if limit <= 0:
        return out
    for item in items:
        item = item.strip()
        if not item or (max_chars is not None and len(item) > max_chars):
            continue
        key = fold(item)
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
        if len(out) >= limit:
            break
    return out
