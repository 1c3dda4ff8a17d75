"""Walking the served root: which files count, their stat records and the walk order."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

# Directory names never walked (runtime and tooling output); compared per root-relative part.
# Beyond the reference's: where tools keep copies of the user's notes that the tool itself
# never shows as notes (deleted ones in Obsidian's and the desktop's trash, Syncthing's old
# versions); served, each would be a second page with the same title, or a deleted one.
IGNORED_DIRS = frozenset(
    {".git", ".runtime-logs", "node_modules", ".venv", "__pycache__", "dist", "build",
     ".trash", ".Trash", ".Trashes", ".stversions"}
)
# Editor marker directories: recorded (at the root) but never descended.
MARKER_DIRS = frozenset({".obsidian", ".foam"})
CONFIG_NAMES = frozenset(
    {
        ".wiki-compiler.json",
        "dendron.yml",
        "quartz.config.js",
        "quartz.config.ts",
        "quartz.config.yaml",
        "quartz.config.yml",
    }
)
ROOT_CONFIG_PATHS = frozenset({".obsidian", ".foam", ".vscode/extensions.json", "logseq/config.edn"})
PAGE_SUFFIXES = (".md", ".org")
# Why a walked entry is ignored (diagnostic reasons).
SYMLINK_IGNORED = "symlink_ignored"
NAME_NOT_UTF8 = "name_not_utf8"


def utf8_name(name: str) -> bool:
    """Whether a name read from the file system is UTF-8 (Python keeps other bytes as lone
    surrogates, which no answer, log or signature can encode)."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(rel: str) -> str:
    """A path with the bytes that are not UTF-8 written as \\xNN, for diagnostics."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def is_tracked_file(rel: str) -> bool:
    """Whether a root-relative regular file takes part in the projection (the signature set)."""
    parts = rel.split("/")
    name = parts[-1]
    lower = name.lower()
    if any(p in IGNORED_DIRS or p in MARKER_DIRS for p in parts[:-1]):
        return False
    if lower.endswith(PAGE_SUFFIXES):
        return ".vscode" not in parts[:-1]
    if name == "graph.json" and len(parts) >= 2 and parts[-2] == "graph":
        return True
    return rel in ROOT_CONFIG_PATHS or name in CONFIG_NAMES


def _tracked_in(walked_dir: str) -> Callable[[str, str], bool]:
    """is_tracked_file for the files of one walked directory (whose parts, being walked,
    are neither ignored nor marker dirs): what depends on the directory is decided once."""
    if not is_walked_dir(walked_dir):  # a re-walk may start at any directory
        return lambda rel, name: is_tracked_file(rel)
    parts = walked_dir.split("/") if walked_dir else []
    pages = ".vscode" not in parts
    sidecar = bool(parts) and parts[-1] == "graph"

    def tracked(rel: str, name: str) -> bool:
        if name.lower().endswith(PAGE_SUFFIXES):
            return pages
        if name == "graph.json":
            return sidecar
        return rel in ROOT_CONFIG_PATHS or name in CONFIG_NAMES

    return tracked


def is_walked_dir(rel: str) -> bool:
    """Whether a root-relative directory is descended into."""
    parts = rel.split("/")
    return not any(p in IGNORED_DIRS or p in MARKER_DIRS for p in parts)


class FileStat(NamedTuple):
    """What stat tells about one file; equal stats mean unchanged content (see page_cache)."""

    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStat:
        return tuple.__new__(cls, (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev))


@dataclass(slots=True)
class Walk:
    """One top-down walk of the root: tracked files, walked dirs and root marker dirs."""

    files: dict[str, FileStat]  # in walk order (see walk_order_key)
    dirs: list[str]
    marker_dirs: dict[str, int]  # rel -> directory st_size (part of the signature)
    # Entries ignored and reported, path -> reason: symlinked pages and sidecars, and pages and
    # directories whose names are not UTF-8 (their path as shown_name() writes it).
    ignored: dict[str, str] = field(default_factory=dict)


def walk_root(root: str) -> Walk:
    """Walk `root` without following symlinks (so loops and escapes are impossible)."""
    result = Walk(files={}, dirs=[], marker_dirs={})
    walk_dir(root, "", result)
    return result


def walk_dir(root: str, rel_dir: str, into: Walk) -> None:
    """Add the subtree at root-relative `rel_dir` ("" for the root) to `into`."""
    stack = [rel_dir]
    while stack:
        current = stack.pop()
        into.dirs.append(current)
        base = os.path.join(root, current) if current else root
        try:
            # Sorted by name, so files land in `files` in the signature's walk order.
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            continue
        subdirs: list[str] = []
        tracked = _tracked_in(current)
        for entry in entries:
            rel = f"{current}/{entry.name}" if current else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            mode = st.st_mode
            if not utf8_name(entry.name):
                if stat.S_ISDIR(mode) or entry.name.lower().endswith(PAGE_SUFFIXES):
                    into.ignored[shown_name(rel)] = NAME_NOT_UTF8
                continue
            if stat.S_ISLNK(mode):
                if entry.name.lower().endswith(PAGE_SUFFIXES) or entry.name == "graph.json":
                    into.ignored[rel] = SYMLINK_IGNORED
                continue
            if stat.S_ISDIR(mode):
                if not current and entry.name in MARKER_DIRS:
                    into.marker_dirs[rel] = st.st_size
                if is_walked_dir(rel):
                    subdirs.append(rel)
            elif stat.S_ISREG(mode) and tracked(rel, entry.name):
                into.files[rel] = FileStat.of(st)
        # Push in reverse so the walk visits sub-directories in name order.
        stack.extend(sorted(subdirs, reverse=True))


def walk_order_key(rel: str, *, is_marker_dir: bool = False) -> tuple[tuple[int, str], ...]:
    """Sort key reproducing the signature's walk order: per directory, root marker dirs,
    then files by name, then sub-directories by name (pre-order)."""
    parts = rel.split("/")
    head = tuple((1, p) for p in parts[:-1])
    return (*head, (-1 if is_marker_dir else 0, parts[-1]))
