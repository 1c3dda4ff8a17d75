"""The commit a served work tree is at, read without git; a hostile .git yields no commit."""

from __future__ import annotations

import os
from pathlib import Path

from serve.source.git_head import head_commit

OID = "0123456789abcdef0123456789abcdef01234567"


def repo(root: Path, head: str = "ref: refs/heads/main\n") -> Path:
    git = root / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text(head)
    return git


def test_loose_packed_detached_and_linked_work_trees(tmp_path: Path) -> None:
    git = repo(tmp_path / "a")
    (git / "refs" / "heads" / "main").write_text(OID + "\n")
    assert head_commit(str(tmp_path / "a")) == OID
    git = repo(tmp_path / "b")
    (git / "packed-refs").write_text(f"# pack-refs with: peeled\n{OID} refs/heads/main\n")
    assert head_commit(str(tmp_path / "b")) == OID
    repo(tmp_path / "c", OID + "\n")
    assert head_commit(str(tmp_path / "c")) == OID
    # A linked work tree: .git names its git dir, whose commondir holds the refs.
    main = repo(tmp_path / "main")
    (main / "refs" / "heads" / "topic").write_text(OID)
    linked = main / "worktrees" / "topic"
    linked.mkdir(parents=True)
    (linked / "HEAD").write_text("ref: refs/heads/topic\n")
    (linked / "commondir").write_text("../..\n")
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text(f"gitdir: {linked}\n")
    assert head_commit(str(tmp_path / "wt")) == OID


def test_a_hostile_git_dir_gives_no_commit(tmp_path: Path) -> None:
    assert head_commit(str(tmp_path)) is None  # not a work tree
    outside = repo(tmp_path / "outside")
    (outside / "refs" / "heads" / "main").write_text(OID)
    (tmp_path / "link").mkdir()
    os.symlink(outside, tmp_path / "link" / ".git")  # .git as a link: not followed
    assert head_commit(str(tmp_path / "link")) is None
    git = repo(tmp_path / "linked-head")
    (git / "HEAD").unlink()
    os.symlink(outside / "HEAD", git / "HEAD")
    assert head_commit(str(tmp_path / "linked-head")) is None
    git = repo(tmp_path / "traversal", "ref: refs/../../outside/.git/refs/heads/main\n")
    assert head_commit(str(tmp_path / "traversal")) is None
    git = repo(tmp_path / "fifo")
    os.mkfifo(git / "refs" / "heads" / "main")  # a read would block
    assert head_commit(str(tmp_path / "fifo")) is None
    git = repo(tmp_path / "garbage")
    (git / "refs" / "heads" / "main").write_text("not an object id; /etc/passwd\n")
    assert head_commit(str(tmp_path / "garbage")) is None
    git = repo(tmp_path / "huge")
    (git / "HEAD").write_text("ref: refs/heads/main" + " " * 10_000)
    assert head_commit(str(tmp_path / "huge")) is None
