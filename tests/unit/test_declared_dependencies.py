"""Every third-party module edgebuild imports at module level is a declared dependency:
one that arrives only through another package (filelock through torch) breaks the day
that package drops it."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# import name -> distribution name, where they differ
DISTRIBUTIONS = {"yaml": "pyyaml", "PIL": "pillow", "pydantic_core": "pydantic"}


def _module_level_imports() -> dict[str, str]:
    found: dict[str, str] = {}
    for file in sorted((ROOT / "edgebuild").rglob("*.py")):
        for node in ast.parse(file.read_text()).body:  # module level only: lazy ones are fine
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "edgebuild" and top not in sys.stdlib_module_names:
                    found.setdefault(top, str(file.relative_to(ROOT)))
    return found


def test_module_level_imports_are_declared_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {d.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0]
                .split("~")[0].strip().lower() for d in project["dependencies"]}
    missing = {DISTRIBUTIONS.get(name, name).lower(): where
               for name, where in _module_level_imports().items()
               if DISTRIBUTIONS.get(name, name).lower() not in declared}
    assert not missing, f"imported but not declared in pyproject's dependencies: {missing}"
