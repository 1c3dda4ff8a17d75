"""The commit a served folder's git work tree is at, read from its metadata files without
running git (raw-origin metadata).

The folder may be hostile: `.git` and everything it points at is read with bounded,
non-blocking opens that never follow a symbolic link and accept regular files only; ref
names are checked before they become paths, and only a full hex object id is ever
reported. Anything unexpected means "no commit", never an error."""

from __future__ import annotations

import os
import re
import stat

MAX_META_BYTES = 4096  # HEAD, a loose ref, a gitdir or commondir file
MAX_PACKED_REFS_BYTES = 4 * 1024 * 1024
OBJECT_ID_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# refs/<component>(/<component>)*: no empty, dot-led or ".lock" components, no "..".
REF_NAME_RE = re.compile(r"refs/(?:[A-Za-z0-9_+@-][A-Za-z0-9_.+@-]*/)*[A-Za-z0-9_+@-][A-Za-z0-9_.+@-]*")


def _read_small(path: str, limit: int = MAX_META_BYTES) -> str | None:
    """A regular file's text (at most `limit` bytes), opened without following a link (and
    only once it is known not to be a device or a pipe, whose opening can block or act)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    return data.decode("utf-8", "replace")


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def git_dirs(root: str) -> tuple[str, str] | None:
    """(git dir, common dir) of the work tree at `root`: `.git` as a directory, or a `.git`
    file naming one (linked work trees and submodules); neither may be a symbolic link."""
    dot_git = os.path.join(root, ".git")
    if _is_dir(dot_git):
        git_dir = dot_git
    else:
        text = _read_small(dot_git)
        if text is None or not text.startswith("gitdir: "):
            return None
        target = text[len("gitdir: "):].strip()
        git_dir = os.path.normpath(os.path.join(root, target))
        if not target or not _is_dir(git_dir):
            return None
    common = git_dir
    commondir = _read_small(os.path.join(git_dir, "commondir"))
    if commondir is not None and commondir.strip():
        common = os.path.normpath(os.path.join(git_dir, commondir.strip()))
        if not _is_dir(common):
            return None
    return git_dir, common


def _ref(git_dir: str, common: str, name: str) -> str | None:
    if not REF_NAME_RE.fullmatch(name) or ".." in name or name.endswith(".lock"):
        return None
    for base in (git_dir, common):
        text = _read_small(os.path.join(base, *name.split("/")))
        if text is not None:
            value = text.strip()
            return value if OBJECT_ID_RE.fullmatch(value) else None
    packed = _read_small(os.path.join(common, "packed-refs"), MAX_PACKED_REFS_BYTES)
    for line in (packed or "").splitlines():
        oid, _, ref = line.partition(" ")
        if ref == name and OBJECT_ID_RE.fullmatch(oid):
            return oid
    return None


def head_commit(root: str) -> str | None:
    """The object id HEAD resolves to in the work tree at `root`, or None."""
    dirs = git_dirs(root)
    if dirs is None:
        return None
    git_dir, common = dirs
    head = _read_small(os.path.join(git_dir, "HEAD"))
    if head is None:
        return None
    value = head.strip()
    if OBJECT_ID_RE.fullmatch(value):
        return value  # a detached HEAD
    if not value.startswith("ref: "):
        return None
    return _ref(git_dir, common, value[len("ref: "):].strip())
