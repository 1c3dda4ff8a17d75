"""`llmwiki-serve inspect ROOT`: what serve sees in a folder, and why, without starting a server."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve.source import names, okf
from serve.source.layout import (
    COMPILER_MARKER,
    HUB_FILES,
    NAMED_SOURCE_ROOTS,
    QUARTZ_CONFIGS,
    FolderView,
    Layout,
    detect_layout,
)
from serve.source.page import Page
from serve.source.reading import read_head
from serve.source.tree import IGNORED_DIRS, walk_root
from serve.source.visibility import normalized_status
from serve.watch.file_read import decode_text, read_file

CONFIG_READ_BYTES = 1 << 20  # dendron.yml, .vscode/extensions.json and the OKF marker's head
# Why a file is not served, in words (the codes are those of /health's diagnostics).
SKIP_REASONS = {
    "too_large": "larger than --max-page-bytes",
    "binary": "holds NUL bytes: not a text file",
    "not_regular_file": "not a regular file (a FIFO, socket or device)",
    "changing": "being written while it was read",
    "unreadable": "cannot be read (permissions?)",
    "symlink_ignored": "a symbolic link: serve never follows links",
    "name_not_utf8": "its name is not UTF-8",
}
DEGRADED_REASONS = {
    "not_utf8": "not UTF-8: invalid bytes were replaced",
    "frontmatter_invalid": "its frontmatter is not valid YAML: served without it",
}
IGNORED_DIR_REASONS = {
    ".git": "version control", "node_modules": "tool output", ".venv": "tool output",
    "__pycache__": "tool output", "dist": "build output", "build": "build output",
    ".runtime-logs": "tool output", ".trash": "deleted notes", ".Trash": "deleted notes",
    ".Trashes": "deleted notes", ".stversions": "Syncthing's old versions",
}


@dataclass
class Report:
    """What inspect found; `as_json()` is its machine-readable form."""

    root: str
    adapter: str = ""
    implementation: str = ""
    why: str = ""
    page_root: str = "."
    title: str = ""
    title_from: str = ""
    files: int = 0
    pages: int = 0
    approved: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    degraded: list[dict[str, str]] = field(default_factory=list)
    not_pages: list[dict[str, str]] = field(default_factory=list)
    ignored_dirs: list[dict[str, str]] = field(default_factory=list)
    file_name_titles: list[dict[str, str]] = field(default_factory=list)
    withheld: list[dict[str, str]] = field(default_factory=list)
    duplicate_titles: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {key: value for key, value in vars(self).items()}


def shape_reason(layout: Layout, view: FolderView, forced: bool) -> str:
    """Why detection chose `layout`: the marker it found, in the contract's order."""
    adapter = layout.adapter
    if adapter == okf.PROFILE:
        return ("--source-profile okf-v0.2 was given" if forced
                else 'the root index.md declares okf_version: "0.2"')
    if adapter == "obsidian":
        return "an .obsidian/ folder is at the root"
    if adapter == "logseq":
        return ("logseq/config.edn is at the root" if view.has_file("logseq/config.edn")
                else "pages/ and journals/ are at the root")
    if adapter == "dendron":
        return "dendron.yml is at the root"
    if adapter == "foam":
        return ("a .foam marker is at the root" if view.has_file(".foam") or ".foam" in view.markers
                else ".vscode/extensions.json recommends Foam")
    if adapter == "quartz":
        config = next(name for name in QUARTZ_CONFIGS if view.has_file(name))
        return f"{config} is at the root" + (", pages come from content/" if layout.page_root else "")
    if adapter == "llmwiki-markdown":
        where = layout.page_root or "the root"
        hubs = sorted(HUB_FILES & view.child_names(layout.page_root))
        if view.has_file(f"{layout.page_root}/{COMPILER_MARKER}".lstrip("/")):
            found = f"{COMPILER_MARKER} is in {where}"
        elif hubs:
            found = f"{where} holds hub pages ({', '.join(hubs)})"
        else:
            found = f"{where} is named {'/'.join(NAMED_SOURCE_ROOTS)} and holds a quickstart"
        return f"an LLM-compiled wiki: {found}"
    return ("no tool's marker (.obsidian/, logseq/, dendron.yml, .foam, quartz.config.*, "
            "an LLM wiki's hubs) was found: every Markdown file is a page")


def _config_reader(root: str) -> Callable[[str], str | None]:
    def read(rel: str) -> str | None:
        try:
            return decode_text(read_head(os.path.join(root, rel), CONFIG_READ_BYTES))[0]
        except OSError:
            return None
    return read


def _present_ignored_dirs(root: str, dirs: list[str]) -> list[dict[str, str]]:
    found = []
    for rel_dir in dirs:
        for name in sorted(IGNORED_DIRS):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if os.path.isdir(os.path.join(root, rel)) and not os.path.islink(os.path.join(root, rel)):
                found.append({"path": rel, "reason": IGNORED_DIR_REASONS.get(name, "tool output")})
    return found


def _withheld_reason(page: Page) -> str:
    frontmatter = page.frontmatter
    for key in ("draft", "published", "publish"):
        if key in frontmatter:
            return f"{key}: {frontmatter[key]}"
    if page.review_state in ("draft", "proposed", "needs_review"):
        return f"review_state: {page.review_state}"
    return f"status: {normalized_status(page.status)}"


def _title_rule(layout: Layout) -> str:
    options = layout.options
    return options.titles or (names.TITLE_LOGSEQ if options.logseq_titles else names.TITLE_HEADING)


def _fell_back(page: Page, rule: str) -> bool:
    """Whether the title is the file name's, because nothing in the page names it."""
    stem = page.path.rsplit("/", 1)[-1]
    stem = stem[: stem.rfind(".")] if "." in stem else stem
    if page.frontmatter.get("title") not in (None, ""):
        return False
    if rule == names.TITLE_LOGSEQ and names.page_properties(page.text).get("title"):
        return False
    if rule == names.TITLE_HEADING and 1 in page.section_lines[0::3]:
        return False  # a level-1 heading names it, even when it reads like the file name
    return page.title == names.title_of(rule, None, {}, (), stem)


def inspect_folder(root: Path, *, max_page_bytes: int, source_profile: str = "auto") -> Report:
    """Walk and parse ROOT as serve does (serve/source), and say what came of each file."""
    root_str = str(root.resolve())
    report = Report(root=str(root))
    walk = walk_root(root_str)
    view = FolderView(walk.files.keys(), walk.dirs, walk.marker_dirs.keys(), _config_reader(root_str))
    layout = detect_layout(view, root.resolve().name, source_profile)
    report.files = len(walk.files)
    report.ignored_dirs = _present_ignored_dirs(root_str, walk.dirs)
    report.skipped = [{"path": rel, "reason": SKIP_REASONS.get(why, why)}
                      for rel, why in sorted(walk.ignored.items())]
    if layout is None:
        report.why = "no Markdown file was found: serve would answer with no pages"
        return report
    report.adapter, report.implementation = layout.adapter, layout.implementation
    report.why = shape_reason(layout, view, forced=source_profile == okf.PROFILE)
    report.page_root = layout.page_root or "."
    rule = _title_rule(layout)
    pages: list[Page] = []
    paths: dict[str, str] = {}  # page path (relative to the page root) -> root-relative path
    for rel in walk.files:
        page_path = layout.page_rel(rel)
        if page_path is None:
            if layout.options.okf and okf.document_role(rel) == "log":
                report.not_pages.append({"path": rel, "reason": "the bundle's log: history, not a page"})
            elif rel.lower().endswith((".md", ".org")):
                report.not_pages.append({"path": rel, "reason": "outside the folders this shape serves "
                                                                f"({', '.join(layout.scan_dirs)})"})
            continue
        result = read_file((rel, os.path.join(root_str, rel), page_path, layout.options, max_page_bytes,
                            "", layout.role_of(page_path)))
        if result.skipped or result.page is None:
            report.skipped.append({"path": rel, "reason": SKIP_REASONS.get(result.problem, result.problem)})
            continue
        page = result.page
        if invalid := okf.invalid_reason(page):
            report.skipped.append({"path": rel, "reason": f"breaks OKF v0.2: {invalid}"})
        elif page.degraded:
            report.degraded.append({"path": rel,
                                    "reason": DEGRADED_REASONS.get(page.degraded, page.degraded)})
        pages.append(page)
        paths[page.path] = rel
    report.pages = len(pages)
    report.approved = sum(page.approved for page in pages)
    by_title: dict[str, list[Page]] = defaultdict(list)
    for page in pages:
        if not page.approved:
            report.withheld.append({"path": paths[page.path], "reason": _withheld_reason(page)})
        if _fell_back(page, rule):
            report.file_name_titles.append({"path": paths[page.path], "title": page.title})
        by_title[names.collapse(page.title).casefold()].append(page)
    report.duplicate_titles = [
        {"title": group[0].title, "pages": [{"id": p.id, "path": paths[p.path]} for p in group]}
        for group in by_title.values() if len(group) > 1]
    report.title, report.title_from = _wiki_title(pages, layout, paths)
    return report


def _wiki_title(pages: list[Page], layout: Layout, paths: dict[str, str]) -> tuple[str, str]:
    """The wiki's title as the manifest gives it, and where it comes from (the rule is
    docs/metadata-rules.md's)."""
    for role in ("index", "overview"):
        page = next((p for p in pages if p.role == role and p.approved), None)
        if page is not None:
            return page.wiki_title or page.title or layout.folder_name, paths[page.path]
    return layout.folder_name, "the folder's name: no approved index.md or overview.md hub page"


LIST_LINES = 20  # per list in the text form; --json has them all


def render_text(report: Report) -> str:
    lines = [f"Folder: {report.root}"]
    if not report.adapter:
        lines.append(f"Shape: none ({report.why})")
        return "\n".join(lines + _section("Skipped", report.skipped)) + "\n"
    named = f" ({report.implementation})" if report.implementation != report.adapter else ""
    lines += [f"Shape: {report.adapter}{named}, because {report.why}",
              f"Pages come from: {report.page_root}",
              f'Wiki title: "{report.title}" (from {report.title_from})',
              f"Pages: {report.pages} ({report.approved} served, {report.pages - report.approved} "
              f"withheld) from {report.files} files walked"]
    lines += _section("Skipped (not served)", report.skipped)
    lines += _section("Served with a problem", report.degraded)
    lines += _section("Markdown files that are not pages", report.not_pages)
    lines += _section("Folders never read", report.ignored_dirs)
    lines += _section("Withheld (drafts and private pages; served with --allow-drafts and "
                      "include_drafts=true only)", report.withheld)
    lines += _section("Titles from the file name (nothing in the page names it)",
                      [{"path": e["path"], "reason": f'"{e["title"]}"'} for e in report.file_name_titles])
    lines += _section("Titles shared by several pages (a read or link by that title gets the last "
                      "one listed; read the others by id or path)",
                      [{"path": e["title"], "reason": ", ".join(p["path"] for p in e["pages"])}
                       for e in report.duplicate_titles])
    return "\n".join(lines) + "\n"


def _section(heading: str, entries: list[dict[str, str]]) -> list[str]:
    if not entries:
        return []
    shown = [f"  {entry['path']}: {entry['reason']}" for entry in entries[:LIST_LINES]]
    more = len(entries) - LIST_LINES
    return [f"{heading}: {len(entries)}", *shown, *([f"  ... and {more} more (--json lists all)"]
                                                     if more > 0 else [])]
