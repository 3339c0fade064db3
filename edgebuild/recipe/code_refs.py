"""The code a recipe names exists, checked without running any of it.

`model.factory` and a callable dataset's `function` are imported by a stage, long
after `validate` and `plan` said the recipe was fine: a typo in a module name used
to surface only then. Here a `file.py:name` must be a file, and a `module:name`'s
top-level package must be installed. Only the top-level package is looked up
(`importlib.util.find_spec` on a dotted name imports its parents, which would run
the package's code); whether the submodule and the attribute exist is found when
the stage imports them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from edgebuild.recipe.files import resolve_file, split_callable


def missing_code(ref: str, base_dir: Path) -> tuple[str, str] | None:
    """(message, hint) when the file or package `ref` names is not there, else None."""
    try:
        module, attr = split_callable(ref)
    except ValueError:
        return None  # malformed: the schema reports it at the same key
    if module.endswith(".py"):
        path = resolve_file(module, base_dir)
        if path.is_file():
            return None
        return (f"'{ref}': file {path} not found",
                "a `.py` path is relative to the recipe file (or absolute)")
    top = module.split(".", 1)[0]
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):  # a relative or odd name: nothing to find
        found = False
    if found:
        return None
    beside = base_dir / f"{top}.py"
    hint = (f"to use the file beside the recipe, write `{top}.py:{attr}`" if beside.is_file()
            else f"install the package that provides '{top}' in this environment "
                 "(pip install …), or name a file: `path/to/file.py:name`")
    return f"'{ref}': no module named '{top}' is installed", hint
