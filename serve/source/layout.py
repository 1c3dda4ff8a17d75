"""Folder shape detection: which adapter, which files are pages, and where hub roles apply."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import yaml

from serve.source import names, okf
from serve.source.page import ParseOptions

HUB_FILES = frozenset({"index.md", "overview.md", "hot.md", "critical_facts.md", "quickstart.md"})
TYPED_DIRS = (
    "concepts",
    "entities",
    "sources",
    "queries",
    "comparisons",
    "synthesis",
    "syntheses",
    "projects",
    "categories",
    "questions",
)
COMPILER_MARKER = ".wiki-compiler.json"
NAMED_SOURCE_ROOTS = ("wiki", "openwiki")
HUB_SKIP_DIRS = frozenset(
    {".git", ".obsidian", ".foam", "node_modules", ".venv", "__pycache__", "dist", "build", ".vscode"}
)
QUARTZ_CONFIGS = ("quartz.config.ts", "quartz.config.js", "quartz.config.yaml", "quartz.config.yml")
ROLE_BY_NAME = {"hot.md": "hot", "index.md": "index", "quickstart.md": "index", "overview.md": "overview"}
# VS Code's JSON with comments: // and /* */ comments, then the comma before a closing
# bracket, go; strings are matched first so that what they hold is kept. The one file read
# so is .vscode/extensions.json (a few lines).
JSON_STRING = r'("(?:[^"\\\n]|\\.)*")'
JSONC_COMMENT_RE = re.compile(JSON_STRING + r"|//[^\n]*|/\*.*?\*/", re.DOTALL)
JSONC_COMMA_RE = re.compile(JSON_STRING + r"|,(?=\s*[\]}])")
DENDRON_NOTES_DIR = "notes"  # where a self-contained vault keeps its notes


@dataclass(frozen=True, slots=True)
class Layout:
    """How one root is served: the adapter and the rules that pick and place its pages."""

    adapter: str
    implementation: str
    page_root: str  # root-relative directory pages are relative to ("" = the root)
    scan_dirs: tuple[str, ...]  # root-relative dirs whose pages are served ("" = all)
    suffixes: tuple[str, ...]  # page file suffixes (lowercase compare when logseq)
    hub_dirs: frozenset[str]  # page-root-relative dirs whose hub files get hub roles
    options: ParseOptions
    metadata: dict[str, str] = field(default_factory=dict)
    folder_name: str = ""  # name of the page root folder (title fallback)
    sidecar_dirs: tuple[str, ...] = ("",)  # root-relative dirs that may hold graph/graph.json

    def page_rel(self, rel: str) -> str | None:
        """The page path of root-relative file `rel`, or None when it is not a page."""
        lower = rel.lower() if self.adapter == "logseq" else rel
        if not lower.endswith(self.suffixes):
            return None
        if self.scan_dirs != ("",) and not any(rel.startswith(d + "/") for d in self.scan_dirs):
            return None
        if self.page_root:
            return rel[len(self.page_root) + 1 :]
        if self.options.okf and okf.document_role(rel) == "log":
            return None  # an OKF bundle's log is history, not a page
        return rel

    def role_of(self, page_path: str) -> str:
        head, _, name = page_path.rpartition("/")
        if self.options.okf:  # every index.md of an OKF bundle is an index, nested too
            return "index" if okf.document_role(page_path) == "index" else "topic"
        role = ROLE_BY_NAME.get(name.lower())
        if role is None or head not in self.hub_dirs:
            return "topic"
        return role


class FolderView:
    """Questions detection asks about a walk: files and dirs by root-relative path."""

    def __init__(self, files: Iterable[str], dirs: Iterable[str], markers: Iterable[str],
                 read_text: Callable[[str], str | None]) -> None:
        self.files = set(files)
        self.dirs = set(dirs)
        self.markers = set(markers)
        self.read_text = read_text
        self._children: dict[str, set[str]] = {}
        self._md_under: dict[str, bool] = {}
        md_dirs: set[str] = set()
        for rel in self.files:
            head, _, name = rel.rpartition("/")
            self._children.setdefault(head, set()).add(name.lower())
            if rel.endswith(".md"):
                md_dirs.add(head)
        self._md_dirs = md_dirs

    def has_file(self, rel: str) -> bool:
        return rel in self.files

    def has_dir(self, rel: str) -> bool:
        return rel in self.dirs

    def child_names(self, rel_dir: str) -> set[str]:
        return self._children.get(rel_dir, set())

    def has_md_under(self, rel_dir: str) -> bool:
        """At least one page-like .md file anywhere below `rel_dir` ("" = root)."""
        if rel_dir == "":
            return bool(self._md_dirs)
        prefix = rel_dir + "/"
        return any(d == rel_dir or d.startswith(prefix) for d in self._md_dirs)


def _join(base: str, name: str) -> str:
    return f"{base}/{name}" if base else name


def _hub_count(view: FolderView, rel_dir: str) -> int:
    return len(HUB_FILES & view.child_names(rel_dir))


def _has_typed_pages(view: FolderView, rel_dir: str) -> bool:
    return any(
        view.has_dir(_join(rel_dir, t)) and view.has_md_under(_join(rel_dir, t)) for t in TYPED_DIRS
    )


def _has_marker(view: FolderView, rel_dir: str) -> bool:
    return view.has_file(_join(rel_dir, COMPILER_MARKER))


def _named_root_qualifies(view: FolderView, rel_dir: str) -> bool:
    return _has_marker(view, rel_dir) or _hub_count(view, rel_dir) > 0 or _has_typed_pages(view, rel_dir)


def llmwiki_source_root(view: FolderView, root_name: str) -> str | None:
    """The LLMWiki source root ("" for the root itself), or None when not an LLMWiki."""
    for name in NAMED_SOURCE_ROOTS:
        if view.has_dir(name) and _named_root_qualifies(view, name):
            return name
    hubs = view.child_names("")
    if _has_marker(view, ""):
        return ""
    if root_name.casefold() in NAMED_SOURCE_ROOTS and "quickstart.md" in hubs:
        return ""
    if "hot.md" in hubs and ("index.md" in hubs or "overview.md" in hubs):
        return ""
    if _hub_count(view, "") > 0 and _has_typed_pages(view, ""):
        return ""
    return None


def hub_dirs_for_generic(view: FolderView, base: str) -> frozenset[str]:
    """Hub roots of a whole-tree adapter: the base itself plus probable nested LLMWiki roots
    among its immediate children (page-root-relative names)."""
    hubs = {""}
    children = sorted(
        d.rsplit("/", 1)[-1] for d in view.dirs if d and d.rpartition("/")[0] == base
    )
    for name in children:
        rel = _join(base, name)
        if name in NAMED_SOURCE_ROOTS:
            if _named_root_qualifies(view, rel):
                hubs.add(name)
            continue
        if name in HUB_SKIP_DIRS:
            continue
        names = view.child_names(rel)
        if (
            _has_marker(view, rel)
            or _has_typed_pages(view, rel)
            or _hub_count(view, rel) >= 2
        ) or name.casefold() in NAMED_SOURCE_ROOTS and "quickstart.md" in names:
            hubs.add(name)
    return frozenset(hubs)


def _foam_detected(view: FolderView) -> bool:
    if ".foam" in view.markers or view.has_file(".foam"):
        return True
    if not view.has_file(".vscode/extensions.json"):
        return False
    text = view.read_text(".vscode/extensions.json")
    try:
        data = json.loads(jsonc_text(text or ""))
    except ValueError:
        return False
    recs = data.get("recommendations") if isinstance(data, dict) else None
    return isinstance(recs, list) and any(
        isinstance(item, str) and "foam" in item.lower() for item in recs
    )


def jsonc_text(text: str) -> str:
    """JSON text of VS Code's JSONC (comments and trailing commas dropped, strings kept)."""
    def keep_strings(match: re.Match[str]) -> str:
        return match.group(1) or ""

    return JSONC_COMMA_RE.sub(keep_strings, JSONC_COMMENT_RE.sub(keep_strings, text))


def _dendron_vaults(view: FolderView) -> list[str] | None:
    """Configured vault dirs (root-relative), or None when dendron.yml names no vaults."""
    try:
        data = yaml.safe_load(view.read_text("dendron.yml") or "")
    except yaml.YAMLError:
        data = None
    if not isinstance(data, dict):
        return None
    entries: list[object] = []
    workspace = data.get("workspace")
    if isinstance(workspace, dict) and isinstance(workspace.get("vaults"), list):
        entries.extend(workspace["vaults"])
    if isinstance(data.get("vaults"), list):
        entries.extend(data["vaults"])
    vaults: list[str] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        fs_path = entry.get("fsPath")
        if not isinstance(fs_path, str) or not fs_path.strip():
            continue
        parts = [p for p in fs_path.strip().replace("\\", "/").split("/") if p not in ("", ".")]
        if ".." in parts or fs_path.startswith("/"):
            continue  # escapes the root
        if entry.get("selfContained") is True:
            parts.append(DENDRON_NOTES_DIR)  # the vault is a workspace; notes/ holds its notes
        if not parts:
            continue  # the workspace root itself is not a vault's note folder
        rel = "/".join(parts)
        if rel not in vaults:
            vaults.append(rel)
    return vaults if entries else None


def okf_declared(view: FolderView) -> bool:
    """Whether root/index.md (a regular file: the walk skips symlinks) declares OKF v0.2.
    One read of its head, only when it exists."""
    if not view.has_file(okf.MARKER):
        return False
    return okf.declared_version(view.read_text(okf.MARKER) or "") == okf.VERSION


def detect_layout(view: FolderView, root_name: str, source_profile: str = "auto") -> Layout | None:
    """First matching adapter, in the contract's order; None when nothing matches. The OKF
    profile may also be forced, and then there is no fall-through to other adapters."""
    md = (".md",)
    generic_opts = ParseOptions()
    if source_profile == okf.PROFILE or okf_declared(view):
        return Layout(okf.PROFILE, okf.IMPLEMENTATION, "", ("",), md, frozenset({""}),
                      ParseOptions(okf=True),
                      {"source_root": ".", "source_profile": okf.PROFILE,
                       "format_version": okf.VERSION}, root_name)
    if (view.has_dir(".obsidian") or ".obsidian" in view.markers) and view.has_md_under(""):
        return Layout("obsidian", "Obsidian vault", "", ("",), md,
                      hub_dirs_for_generic(view, ""), ParseOptions(titles=names.TITLE_FILE),
                      {"source_root": "."}, root_name)
    if view.has_file("logseq/config.edn") or (view.has_dir("pages") and view.has_dir("journals")):
        return Layout("logseq", "logseq/logseq", "", ("pages", "journals"), (".md", ".org"),
                      frozenset(), ParseOptions(logseq_titles=True, titles=names.TITLE_LOGSEQ),
                      {"source_root": "."}, root_name)
    if view.has_file("dendron.yml"):
        return _dendron_layout(view, root_name)
    if _foam_detected(view):
        return Layout("foam", "foambubble/foam", "", ("",), md,
                      hub_dirs_for_generic(view, ""), generic_opts,
                      {"source_root": "."}, root_name)
    if any(view.has_file(name) for name in QUARTZ_CONFIGS):
        content = "content" if view.has_dir("content") else ""
        label = content or "."
        return Layout("quartz", "jackyzha0/quartz", content, (content,), md,
                      hub_dirs_for_generic(view, content), ParseOptions(titles=names.TITLE_FILE),
                      {"content_root": label, "source_root": label},
                      content or root_name, sidecar_dirs=tuple(dict.fromkeys(("", content))))
    source_root = llmwiki_source_root(view, root_name)
    if source_root is not None:
        return Layout("llmwiki-markdown", "llmwiki-markdown", source_root, (source_root,), md,
                      frozenset({""}), generic_opts, {"source_root": source_root or "."},
                      source_root or root_name, sidecar_dirs=tuple(dict.fromkeys(("", source_root))))
    if view.has_md_under(""):
        return Layout("generic-markdown", "generic-markdown", "", ("",), md,
                      hub_dirs_for_generic(view, ""), generic_opts,
                      {"source_root": "."}, root_name)
    return None


def _dendron_layout(view: FolderView, root_name: str) -> Layout:
    opts = ParseOptions(alias_target_last=True, titles=names.TITLE_FRONTMATTER)
    vaults = _dendron_vaults(view)
    md = (".md",)
    if vaults is None:
        return Layout("dendron", "dendronhq/dendron", "", ("",), md, frozenset({""}), opts,
                      {"source_root": "."}, root_name)
    existing = [v for v in vaults if view.has_dir(v)]
    if len(vaults) == 1:
        vault = vaults[0]
        return Layout("dendron", "dendronhq/dendron", vault, (vault,) if existing else ("\0",),
                      md, frozenset({""}), opts, {"source_root": vault},
                      vault.rsplit("/", 1)[-1], sidecar_dirs=("", vault))
    return Layout("dendron", "dendronhq/dendron", "", tuple(existing) or ("\0",), md,
                  frozenset({""}), opts,
                  {"source_root": ".", "vault_roots": ",".join(vaults)}, root_name,
                  sidecar_dirs=("", *existing))
