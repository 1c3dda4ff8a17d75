"""Helpers that materialise fixture folders for tests and benchmarks (stdlib only)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

FIXTURES: Path = Path(__file__).resolve().parents[2] / "fixtures"

OUTSIDE_SECRET_WORD = "OUTSIDESECRET"
OUTSIDE_GRAPH_RELATION = "leaked_relation"
# Invalid OKF bundles kept under fixtures/adversarial: roots of their own, not pages of the
# adversarial generic-Markdown root.
OKF_INVALID = shutil.ignore_patterns("okf-invalid-*")


def rewrite(root: Path, rel: str, text: str) -> None:
    """Write `text` to root/rel with its mtime a second on: an edit a stat walk cannot miss,
    even within one clock tick of the last."""
    path = root / rel
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def copy_fixture(name: str, dest: Path) -> Path:
    """Copy fixtures/<name> into dest/<last path part of name> and return the copy."""
    source = FIXTURES / name
    if not source.is_dir():
        raise FileNotFoundError(f"unknown fixture: {name}")
    target = Path(dest) / Path(name).name
    shutil.copytree(source, target, symlinks=True, ignore=OKF_INVALID if name == "adversarial" else None)
    return target


def _write_huge_page(path: Path, size: int) -> None:
    """Write a valid Markdown page of exactly ``size`` bytes (ASCII only)."""
    header = b"# Huge Page\n\nA very large but well-formed page.\n\n"
    paragraph = (
        b"The quick release pipeline packages every artifact, signs it and uploads it. "
        b"Reviewers confirm the changelog before the tag is pushed.\n\n"
    )
    with path.open("wb") as handle:
        if size <= len(header):
            handle.write(header[:size])
            return
        handle.write(header)
        remaining = size - len(header)
        chunk = paragraph * max(1, (1024 * 1024) // len(paragraph))
        while remaining >= len(chunk):
            handle.write(chunk)
            remaining -= len(chunk)
        while remaining >= len(paragraph):
            handle.write(paragraph)
            remaining -= len(paragraph)
        if remaining:
            handle.write(b"x" * (remaining - 1) + b"\n" if remaining > 1 else b"\n")


def build_adversarial(dest: Path, *, huge_bytes: int = 20 * 1024 * 1024) -> Path:
    """Build the hostile generic-Markdown folder under dest and return its root."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    root = dest / "adversarial"
    shutil.copytree(FIXTURES / "adversarial", root, symlinks=True, ignore=OKF_INVALID)

    _write_huge_page(root / "huge.md", huge_bytes)

    outside_md = dest / "outside-secret.md"
    outside_md.write_text(
        f"# Outside Secret\n\n{OUTSIDE_SECRET_WORD} lives outside the served root.\n",
        encoding="utf-8",
    )
    (root / "escape-link.md").symlink_to(outside_md)

    loop = root / "loop"
    loop.mkdir()
    (loop / "self").symlink_to("..", target_is_directory=True)
    (loop / "page.md").write_text(
        "# Loop Page\n\nA normal page next to a symlinked directory loop.\n",
        encoding="utf-8",
    )

    outside_graph = dest / "outside-graph.json"
    outside_graph.write_text(
        json.dumps(
            {
                "edges": [
                    {
                        "from": "good",
                        "to": "another-good",
                        "type": OUTSIDE_GRAPH_RELATION,
                        "confidence": 0.99,
                    },
                    {"from": "good", "to": OUTSIDE_SECRET_WORD, "type": "links_to"},
                ]
            }
        ),
        encoding="utf-8",
    )
    (root / "graph").mkdir()
    (root / "graph" / "graph.json").symlink_to(outside_graph)
    return root


def tree_digest(root: Path) -> str:
    """Return a SHA-256 over every relative path, file's bytes and symlink target under root."""
    root = Path(root)
    digest = hashlib.sha256()
    for current, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        base = Path(current)
        for name in sorted([*dirnames, *filenames]):
            path = base / name
            rel = os.fsencode(path.relative_to(root).as_posix())
            if path.is_symlink():
                digest.update(b"L\0" + rel + b"\0" + os.fsencode(os.readlink(path)) + b"\0")
            elif path.is_dir():
                digest.update(b"D\0" + rel + b"\0")
            elif path.is_file():
                digest.update(b"F\0" + rel + b"\0")
                file_hash = hashlib.sha256()
                with path.open("rb") as handle:
                    for block in iter(lambda: handle.read(1024 * 1024), b""):
                        file_hash.update(block)
                digest.update(file_hash.digest())
            else:
                digest.update(b"O\0" + rel + b"\0")
    return digest.hexdigest()
