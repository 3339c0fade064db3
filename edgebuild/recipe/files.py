"""Resolve the files a recipe names, without importing the packages involved."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from edgebuild.errors import EdgebuildError
from edgebuild.recipe.common import PackageFile


def package_dir(package: str) -> Path:
    """The folder of an installed top-level package (found, not imported)."""
    top, _, rest = package.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise EdgebuildError(f"package '{top}' is not installed",
                             f"install it (pip install {top.replace('_', '-')})")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder.joinpath(*rest.split(".")) if rest else folder


def resolve_file(ref: str | PackageFile, base_dir: Path) -> Path:
    """A recipe path: relative to the recipe's folder, absolute, or inside a package."""
    if isinstance(ref, PackageFile):
        return package_dir(ref.package) / ref.path
    path = Path(ref).expanduser()
    return path if path.is_absolute() else base_dir / path


def module_file(module: str, base_dir: Path) -> Path | None:
    """The source file of `module` (a dotted name or a `.py` path), or None if built in."""
    if module.endswith(".py"):
        return resolve_file(module, base_dir)
    parts = module.split(".")
    folder = package_dir(parts[0]) if len(parts) > 1 else None
    if folder is None:
        spec = importlib.util.find_spec(module)
        return Path(spec.origin) if spec and spec.origin and spec.has_location else None
    candidate = folder.joinpath(*parts[1:])
    for option in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if option.is_file():
            return option
    return None


def split_callable(ref: str) -> tuple[str, str]:
    """`module:attr.path` -> (module, attr.path); ValueError when malformed."""
    module, sep, attr = ref.rpartition(":")
    if not sep or not module or not attr:
        raise ValueError(f"'{ref}' is not `module:callable` or `file.py:callable`")
    return module, attr


def load_callable(ref: str, base_dir: Path) -> object:
    """Import `module:attr.path` or `path/to/file.py:attr` and return the attribute."""
    import importlib
    import sys

    module_name, attr = split_callable(ref)
    if module_name.endswith(".py"):
        path = resolve_file(module_name, base_dir)
        if not path.is_file():
            raise EdgebuildError(f"'{ref}': file {path} not found")
        name = f"_edgebuild_user_{path.stem}"
        loaded = sys.modules.get(name)
        stat = path.stat()
        version = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
        if loaded is not None and getattr(loaded, "_edgebuild_file", None) == version:
            # Imported once, as Python would: a file that registers a torch custom op
            # (the factory's and the recipe's `custom_ops:` both name it) cannot run twice.
            module = loaded
        else:
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise EdgebuildError(f"'{ref}': cannot import {path}")
            module = importlib.util.module_from_spec(spec)
            # Registered so that pickles of its classes (a pruned model) load in another
            # process.
            sys.modules[spec.name] = module
            module._edgebuild_file = version  # type: ignore[attr-defined]
            spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise EdgebuildError(f"'{ref}': cannot import {module_name}: {exc}",
                                 "is the package installed in this environment?") from exc
    value: object = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise EdgebuildError(f"'{ref}': {module_name} has no attribute '{attr}'") from None
    return value
