"""Which page a read names: what graph seeds accept (id, path with or without its suffix,
title, alias, file name; a Logseq graph's `pages/` prefix optional).

An exact id or path is looked up first and answered as before (a withheld page stays
withheld). Titles and aliases then match as link targets do (case, spaces and punctuation
aside); ids, paths and file names only in any case and without their suffix, so that
`etc/passwd` never names a page whose id is `../../etc/passwd`. These looser forms match
only the pages the caller may see: a draft's title or alias finds nothing rather than
telling that the draft exists. Requests never reach the filesystem.
"""

from __future__ import annotations

from serve.graph.model import OWN_KEYS, TITLE_KEY, lookup_key
from serve.snapshot.projection import Projection
from serve.source.page import Page

LOGSEQ_DIRS = ("pages/", "journals/")
SUFFIXES = (".md", ".org")


def exact_forms(key: str, adapter: str) -> list[str]:
    """The id/path spellings of `key`: as given, without or with a page suffix, and for a
    Logseq graph with its `pages/` or `journals/` folder in front."""
    key = key.strip().replace("\\", "/")
    bare = key
    for suffix in SUFFIXES:
        if key.lower().endswith(suffix):
            bare = key[: -len(suffix)]
    forms = [key, bare, *(bare + suffix for suffix in SUFFIXES)]
    if adapter == "logseq" and not key.startswith(LOGSEQ_DIRS):
        forms += [d + form for d in LOGSEQ_DIRS for form in forms]
    return list(dict.fromkeys(f for f in forms if f))


def find_read_target(projection: Projection, key: str, include_drafts: bool) -> Page | None:
    """The page `key` names, or None. The caller still checks the page's visibility (an
    exact id or path of a draft is withheld, not missing)."""
    page = projection.find_page(key)
    if page is not None:
        return page
    if _path_like(key):
        return None  # '..', '.' and rooted paths are only ever exact ids or paths
    for form in exact_forms(key, projection.layout.adapter):
        page = projection.find_page(form)
        if page is not None:
            return page
    wanted = lookup_key(key)
    if not wanted:
        return None
    # Every key of every page is in the link lookup: no entry, no page of that name.
    hit = projection.lookup.get(wanted)
    if hit is None:
        return None
    plain = _plain(key)
    if (hit.approved or include_drafts) and _names(projection, hit, wanted, plain):
        return hit
    # The lookup's owner of the key is withheld, or holds it in another way (a nested
    # root's `<root>/<id>`, punctuation only): look for a visible page that has the name.
    found: Page | None = None
    for page in projection.pages if include_drafts else projection.approved_pages:
        if _names(projection, page, wanted, plain):
            found = page  # later pages win, as in the link lookup
    return found


def _path_like(key: str) -> bool:
    parts = key.strip().replace("\\", "/").split("/")
    return key.strip().startswith("/") or any(part in (".", "..") for part in parts)


def _plain(key: str) -> str:
    """`key` as a path or id is compared: case-folded, without a page suffix."""
    key = key.strip().replace("\\", "/")
    for suffix in SUFFIXES:
        if key.lower().endswith(suffix):
            key = key[: -len(suffix)]
    return key.casefold()


def _names(projection: Projection, page: Page, wanted: str, plain: str) -> bool:
    """Whether the page's title or an alias has lookup key `wanted`, or its id, path or file
    name is `plain` (any case, suffix optional)."""
    fragment = projection.fragments[projection.position[page.path]]
    if wanted == fragment.page_keys[TITLE_KEY] or wanted in fragment.page_keys[OWN_KEYS:]:
        return True
    path = _plain(page.path)
    return plain in (page.id.casefold(), path, path.rsplit("/", 1)[-1])
