"""Opaque handles of pages and their sections: llmwiki://<source_id>/pages/<page_id>[#<anchor>].

Each part's ASCII characters are percent-encoded with none kept safe (so a '/' in a page id is
%2F and the handle splits unambiguously); other characters stay as they are, as in an IRI,
because a Korean anchor percent-encoded is three times its UTF-8 size in every pack. Clients
treat handles as opaque and pass them back to read."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import quote, unquote

SCHEME = "llmwiki://"
PAGES = "/pages/"


ASCII_RUN = re.compile(r"[\x00-\x7f]+")


def _encode(part: str) -> str:
    return ASCII_RUN.sub(lambda run: quote(run.group(), safe=""), part)


class Handle(NamedTuple):
    source_id: str
    page_id: str
    anchor: str  # "" for the page itself


@lru_cache(maxsize=8192)
def page_handle(source_id: str, page_id: str) -> str:
    return f"{SCHEME}{_encode(source_id)}{PAGES}{_encode(page_id)}"


@lru_cache(maxsize=8192)
def section_handle(source_id: str, page_id: str, anchor: str) -> str:
    """A section's handle; the page's when `anchor` is empty."""
    base = page_handle(source_id, page_id)
    return f"{base}#{_encode(anchor)}" if anchor else base


def parse_handle(value: str) -> Handle | None:
    """The parts of a page or section handle; None for anything else."""
    if not value.startswith(SCHEME):
        return None
    source_part, sep, rest = value[len(SCHEME):].partition(PAGES)
    if not sep or not source_part or "/" in source_part:
        return None
    page_part, _, anchor = rest.partition("#")
    if not page_part:
        return None
    return Handle(unquote(source_part), unquote(page_part), unquote(anchor))
