"""edgebuild's packages import each other in one direction only (no cycles), and no
module grows past the size a reader can hold.

Imports inside `if TYPE_CHECKING:` do not count (they never run); imports inside
functions do: a deferred import is still a dependency, and `from edgebuild import api`
is an import of the module api. The order of the packages (type-only imports counted)
is import-linter's contract in pyproject.toml, run by `make lint`.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "edgebuild"
MAX_LINES = 560  # "~500": a little slack for a docstring, never a god file


def _unit(module: str) -> str:
    """The node of the graph: a subpackage (`plan`) or a top-level module (`cli`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "edgebuild"


def _is_unit(name: str) -> bool:
    """A subpackage or a top-level module of edgebuild (not `__version__`)."""
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def _runtime_imports(tree: ast.AST) -> list[str]:
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "edgebuild":  # `from edgebuild import api`: the module api
                found.extend(f"edgebuild.{alias.name}" for alias in node.names
                             if _is_unit(alias.name))
            else:
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return [name for name in found if name == "edgebuild" or name.startswith("edgebuild.")]


def package_graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for file in PACKAGE.rglob("*.py"):
        relative = file.relative_to(PACKAGE.parent).with_suffix("")
        source = _unit(".".join(relative.parts))
        for name in _runtime_imports(ast.parse(file.read_text())):
            target = _unit(name)
            if target not in (source, "edgebuild"):  # edgebuild/__init__: the version only
                edges[source].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(set(edges) | {n for targets in edges.values() for n in targets}):
        if node not in index:
            connect(node)
    return found


def test_no_import_cycles_between_packages() -> None:
    edges = package_graph()
    assert cycles(edges) == [], {k: sorted(v) for k, v in sorted(edges.items())}


def test_from_edgebuild_import_a_module_is_an_edge() -> None:
    """`from edgebuild import api` imports the module api (run/profile.py did, unseen);
    `from edgebuild import __version__` is the package's own version, no edge."""
    tree = ast.parse("from edgebuild import api, __version__\n"
                     "def f():\n    from edgebuild import run\n")
    assert _runtime_imports(tree) == ["edgebuild.api", "edgebuild.run"]


def test_core_depends_on_nothing_but_errors() -> None:
    assert package_graph()["core"] <= {"errors"}


def test_no_module_is_a_god_file() -> None:
    sizes = {str(f.relative_to(PACKAGE)): len(f.read_text().splitlines())
             for f in PACKAGE.rglob("*.py")}
    assert {f: n for f, n in sizes.items() if n > MAX_LINES} == {}
