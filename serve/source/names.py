"""What a page is called, as its authoring tool shows it: the title rule of each shape,
aliases, Logseq page properties and the links Obsidian reads from frontmatter properties.

The rules (docs/metadata-rules.md):

- obsidian, quartz: frontmatter `title`, else the file name as it is;
- logseq: the `title::` page property, else the file name with Logseq's escapes decoded
  (`___` -> `/`, url-encodings such as `%3F` -> `?`);
- dendron: frontmatter `title`, else the file name;
- everything else (foam, generic Markdown, LLMWiki folders): frontmatter `title`, else the
  first level-1 heading, else the file name with `-` as a space.

No rule takes a `##` or deeper heading: those name a section, not the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

TITLE_FILE = "file"  # obsidian, quartz
TITLE_LOGSEQ = "logseq"
TITLE_FRONTMATTER = "frontmatter"  # dendron
TITLE_HEADING = "heading"  # foam, generic Markdown, LLMWiki folders

ALIAS_KEYS = ("aliases", "alias")
# A Logseq page's properties: `key:: value` lines at the very start of the file (the first
# block), the first one optionally written as a bullet; Org pages say `#+key: value`.
PROPERTY_RE = re.compile(r"[ \t]*(?:- )?([A-Za-z][\w-]*)::(?:[ \t]+(.*))?$")
ORG_PROPERTY_RE = re.compile(r"#\+([A-Za-z][\w-]*):[ \t]*(.*)$")
MAX_PROPERTY_LINES = 50
WIKILINK_RE = re.compile(r"\[\[([^\[\]\n]+)\]\]")
PERCENT_RE = re.compile(r"%[0-9A-Fa-f]{2}")


def collapse(text: str) -> str:
    return " ".join(text.split())


def page_properties(body: str) -> dict[str, str]:
    """The leading `key:: value` lines of a Logseq page (lower-case keys, first one wins)."""
    found: dict[str, str] = {}
    if "::" not in body and "#+" not in body:
        return found
    for number, line in enumerate(body.lstrip("\n").split("\n", MAX_PROPERTY_LINES)):
        if number >= MAX_PROPERTY_LINES:
            break
        match = PROPERTY_RE.match(line) or ORG_PROPERTY_RE.match(line)
        if match is None:
            if not line.strip():
                continue
            break
        found.setdefault(match.group(1).lower(), (match.group(2) or "").strip())
    return found


def property_values(value: str) -> list[str]:
    """A Logseq property's items: `a, b`, `[[a]], [[b]]` or `[[a, b]]` (one page)."""
    links = WIKILINK_RE.findall(value)
    rest = WIKILINK_RE.sub(",", value)
    items = [*links, *rest.split(",")]
    return [collapse(item.strip().strip('"')) for item in items if item.strip(" ,\"")]


def logseq_file_title(stem: str) -> str:
    """A Logseq file name as the page name: `___` is the namespace `/`, and characters a
    file name cannot hold are url-encoded (`%3F` is `?`, `%2F` the legacy `/`)."""
    name = stem.replace("___", "/")
    if "%" in name and PERCENT_RE.search(name):
        name = unquote(name)
    return collapse(name)


def title_of(rule: str, frontmatter_title: Any, properties: dict[str, str],
             headings: Iterable[tuple[str, int, int]], stem: str) -> str:
    """The page title under `rule` (TITLE_*), from the frontmatter `title` (already a
    string or None), the Logseq properties, the (text, level, line) headings and the
    file stem."""
    if rule == TITLE_LOGSEQ:
        title = collapse(properties.get("title", ""))
        if not title and isinstance(frontmatter_title, str):
            title = frontmatter_title
        return title or logseq_file_title(stem)
    if isinstance(frontmatter_title, str) and frontmatter_title:
        return frontmatter_title
    if rule in (TITLE_FILE, TITLE_FRONTMATTER):
        return collapse(stem) or stem
    for text, level, _ in headings:
        if level == 1:
            return text
    return collapse(stem.replace("-", " "))


def aliases_of(frontmatter: dict[str, Any], properties: dict[str, str]) -> list[str]:
    """Frontmatter `aliases`/`alias` (a list or a single string; a string may list several,
    comma-separated, as Logseq writes them) and Logseq's `alias::` property."""
    found: list[str] = []
    for key in ALIAS_KEYS:
        value = frontmatter.get(key)
        if isinstance(value, str):
            found += property_values(value)
        elif isinstance(value, list):
            found += [collapse(unlinked(str(v))) for v in value
                      if isinstance(v, str | int | float) and not isinstance(v, bool)]
    if "alias" in properties:
        found += property_values(properties["alias"])
    return [alias for alias in found if alias]


def unlinked(value: str) -> str:
    """`[[Name]]` -> `Name` (Obsidian writes linked aliases so); other text unchanged."""
    match = WIKILINK_RE.fullmatch(value.strip())
    return match.group(1) if match else value


def property_links(frontmatter: dict[str, Any]) -> list[str]:
    """Wikilinks in frontmatter property values (`categories: "[[Places]]"`, lists of
    them): Obsidian shows them as links and backlinks. Top-level strings and lists of
    strings only; `aliases` is a name, not a link."""
    found: list[str] = []
    for key, value in frontmatter.items():
        if key in ALIAS_KEYS:
            continue
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, str) and "[[" in item:
                found += WIKILINK_RE.findall(item)
    return found
