"""Every built-in backend folder keeps the same file convention (docs/extending.md):

    backends/<name>/backend.py   the declaration: exactly one class, `XBackend(Backend[XOptions])`,
                                 with XOptions imported from options.py
    backends/<name>/options.py   the options model(s); never imports backend.py

so a newcomer finds a backend's options in the same place in every folder, and the
options sit below the code that reads them (no import circle through backend.py).
Read from the source (ast) and checked against the class that the import makes.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import pytest

import edgebuild.backends
from edgebuild.backends.base import Backend

BACKENDS = Path(edgebuild.backends.__file__).parent
FOLDERS = sorted(p.parent.name for p in BACKENDS.glob("*/__init__.py"))
PYPROJECT = BACKENDS.parents[1] / "pyproject.toml"


def test_every_builtin_backend_has_its_folder() -> None:
    entry_points = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]
    registered = {value.split(":")[0].split(".")[2]
                  for value in entry_points["edgebuild.backends"].values()}
    assert registered == set(FOLDERS)


def _declaration(folder: str) -> tuple[ast.ClassDef, str]:
    """backend.py's one class and the name of the options model it is parameterised by."""
    tree = ast.parse((BACKENDS / folder / "backend.py").read_text())
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    assert len(classes) == 1, (
        f"backends/{folder}/backend.py defines {[c.name for c in classes]}: the "
        "declaration only (options go to options.py, a runner to runner.py)")
    (declared,) = classes
    generic = [b for b in declared.bases
               if isinstance(b, ast.Subscript) and isinstance(b.value, ast.Name)
               and b.value.id == "Backend" and isinstance(b.slice, ast.Name)]
    assert generic, f"{declared.name} must subclass Backend[<its options model>]"
    slice_ = generic[0].slice
    assert isinstance(slice_, ast.Name)
    return declared, slice_.id


@pytest.mark.parametrize("folder", FOLDERS)
def test_backend_folder_holds_backend_and_options(folder: str) -> None:
    assert (BACKENDS / folder / "backend.py").is_file()
    assert (BACKENDS / folder / "options.py").is_file()


@pytest.mark.parametrize("folder", FOLDERS)
def test_backend_py_declares_one_backend_with_options_from_options_py(folder: str) -> None:
    declared, options_name = _declaration(folder)
    tree = ast.parse((BACKENDS / folder / "backend.py").read_text())
    options_module = f"edgebuild.backends.{folder}.options"
    imported = {alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == options_module
                for alias in node.names}
    assert options_name in imported, f"backend.py must import {options_name} from options.py"
    assert not any(isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "Options" for t in node.targets)
        for node in declared.body), "Options comes from Backend[...], not an assignment"

    cls = getattr(importlib.import_module(f"edgebuild.backends.{folder}.backend"),
                  declared.name)
    assert issubclass(cls, Backend)
    assert cls.Options is getattr(importlib.import_module(options_module), options_name)


@pytest.mark.parametrize("folder", FOLDERS)
def test_options_py_sits_below_backend_py(folder: str) -> None:
    tree = ast.parse((BACKENDS / folder / "options.py").read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert f"edgebuild.backends.{folder}.backend" not in modules
