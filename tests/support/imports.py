"""A package's modules and what each imports, read from the source (ast, nothing imported): the
layer tests of both services walk these."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class ImportGraph:
    """The modules of one package of the repository and their imports."""

    def __init__(self, package: str) -> None:
        self.modules = {module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}
        self._imports: dict[str, frozenset[str]] = {}

    def imports_of(self, module: str) -> frozenset[str]:
        """Every module `module` imports, at any depth of its code (functions and TYPE_CHECKING
        blocks too); `from pkg.x import y` counts as `pkg.x.y` when that is a module here."""
        if module not in self._imports:
            found: set[str] = set()
            tree = ast.parse(self.modules[module].read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.add(node.module)
                    found.update(name for a in node.names
                                 if (name := f"{node.module}.{a.name}") in self.modules)
            self._imports[module] = frozenset(found)
        return self._imports[module]

    def reachable(self, module: str) -> dict[str, str]:
        """Every module `module` imports directly or through this package's modules, each with
        the module that imports it (for a failure message)."""
        seen: dict[str, str] = {}
        todo = [module]
        while todo:
            current = todo.pop()
            for name in self.imports_of(current):
                if name not in seen:
                    seen[name] = current
                    if name in self.modules:
                        todo.append(name)
        return seen
