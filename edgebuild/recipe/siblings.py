"""The modules a `file.py` imports from its own folder, found by reading it (`ast`).

A recipe's `file.py:fn` (a factory, a dataset function, prune's `finetune`, a custom
op's kernel) is often split over files: `train.py` does `from cnn import build`, with
`cnn.py` beside it. Two places need that list, and read it from here:

    execute/remote/carry.py  the siblings travel with the file to a remote worker
    plan/resolve.py   their digests are in the stage's key: editing `cnn.py` rebuilds

Nothing is imported or run on the client: the source is parsed, never executed.
"""

from __future__ import annotations

import ast
from pathlib import Path


def _imported_names(path: Path) -> set[str]:
    """Top-level names `path` imports absolutely (`import a.b`, `from a import b`: 'a')."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return set()  # the stage reports a broken file when it imports it
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def local_imports(source: Path) -> list[tuple[str, Path]]:
    """(name relative to `source`'s folder, path) of each module or package beside `source`
    that it imports, directly or through another one of them; read, never imported.

    A sibling module `x.py` travels alone; a sibling package `x/` travels whole (its
    own relative imports are its business). Sorted, so a task's file list is stable.
    """
    folder = source.resolve().parent
    found: dict[str, Path] = {}
    todo = [source.resolve()]
    while todo:
        for name in sorted(_imported_names(todo.pop())):
            module, package = folder / f"{name}.py", folder / name
            if module.is_file() and module.name not in found:
                found[module.name] = module
                todo.append(module)
            elif (package / "__init__.py").is_file() and f"{name}/__init__.py" not in found:
                for file in sorted(package.rglob("*.py")):
                    if "__pycache__" not in file.parts:
                        found[file.relative_to(folder).as_posix()] = file
                        todo.append(file)
    found.pop(source.name, None)
    return sorted(found.items())
