"""The llmwiki-agent-bridge command line (the bridge service itself is not built yet)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    sys.stderr.write("llmwiki-agent-bridge is not available in this release yet.\n")
    return 2
