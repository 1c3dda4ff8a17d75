"""llmwiki-serve: a read-only Knowledge Source over a Markdown knowledge folder."""

from common.version import __version__

__all__ = ["__version__"]
