"""Every test that runs a full recipe carries the `slow` marker, so `make test-fast`
(`-m "not slow"`) stays the few-minute loop it is documented to be (issue 38).

Read from the source, not by running anything: a test *runs a recipe* when its body, a
helper function of its module, or a fixture it asks for (its module's or a conftest's)
calls the CLI's `run` — `edgebuild("run", …)`, `api.run(…)`, `[…, "-m", "edgebuild",
"run", …]`, `loaded_heavy(["run", …])` — directly or through another such helper.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _calls_run(node: ast.AST) -> bool:
    """Whether `node` itself is a call of the CLI's `run` (one of the module docstring's)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    first = node.args[0] if node.args else None
    if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(
            func.value, ast.Name) and func.value.id == "api":
        return True
    name = func.id if isinstance(func, ast.Name) else ""
    if name == "edgebuild" and isinstance(first, ast.Constant) and first.value == "run":
        return True
    if name == "loaded_heavy" and isinstance(first, ast.List | ast.Tuple) and first.elts \
            and isinstance(first.elts[0], ast.Constant) and first.elts[0].value == "run":
        return True
    return any(_runs_module(arg) for arg in node.args)


def _runs_module(node: ast.AST) -> bool:
    """A literal argument list `[…, "-m", "edgebuild", "run", …]`."""
    if not isinstance(node, ast.List | ast.Tuple):
        return False
    words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
    return any(words[i:i + 3] == ["-m", "edgebuild", "run"] for i in range(len(words)))


def _names_called(node: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _is_slow(decorators: list[ast.expr]) -> bool:
    return any("mark.slow" in ast.unparse(d) for d in decorators)


def _fixtures(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)
            and any("fixture" in ast.unparse(d) for d in f.decorator_list)}


def _runners(functions: dict[str, ast.FunctionDef], known: set[str]) -> set[str]:
    """The functions that run a recipe, directly or through one another (a fixed point)."""
    found = set(known) | {name for name, f in functions.items()
                          if any(_calls_run(n) for n in ast.walk(f))}
    while True:
        more = {name for name, f in functions.items()
                if name not in found and (_names_called(f) & found or {
                    a.arg for a in f.args.args} & found & set(functions))}
        if not more:
            return found
        found |= more


def _conftest_runners() -> set[str]:
    """Fixtures of the conftests that run a recipe (quickstart_build)."""
    runners: set[str] = set()
    for conftest in TESTS.rglob("conftest.py"):
        tree = ast.parse(conftest.read_text())
        functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
        runners |= _runners(functions, set()) & set(_fixtures(tree))
    return runners


def unmarked_recipe_runs() -> list[str]:
    shared = _conftest_runners()
    missing = []
    for file in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(file.read_text())
        module_slow = any(
            isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                              for t in s.targets)
            and "mark.slow" in ast.unparse(s.value) for s in tree.body)
        if module_slow:
            continue
        functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
        runners = _runners(functions, shared)
        for name, function in functions.items():
            if not name.startswith("test_") or _is_slow(function.decorator_list):
                continue
            asked = {a.arg for a in function.args.args}
            if name in runners or asked & runners:
                missing.append(f"{file.relative_to(TESTS.parent)}::{name}")
    return missing


def test_every_test_that_runs_a_recipe_is_marked_slow() -> None:
    missing = unmarked_recipe_runs()
    assert not missing, ("these tests run a full recipe but are not marked "
                         "`@pytest.mark.slow` (make test-fast would run them):\n  "
                         + "\n  ".join(missing))


def test_the_check_sees_each_way_of_running_a_recipe() -> None:
    """The detector itself, on each form it must recognise, and on what it must not."""
    def runs(source: str) -> bool:
        return any(_calls_run(n) for n in ast.walk(ast.parse(source)))

    assert runs('edgebuild("run", "r.yaml")')
    assert runs("api.run(recipe, api.RunOptions())")
    assert runs('subprocess.run([sys.executable, "-m", "edgebuild", "run", str(r)])')
    assert runs('loaded_heavy(["run", "-q", "r.yaml"])')
    assert not runs('edgebuild("plan", "r.yaml")')
    assert not runs('subprocess.run([sys.executable, "-m", "edgebuild", "validate"])')
    tree = ast.parse('def helper():\n    edgebuild("run", "x")\n'
                     'def test_a():\n    helper()\n'
                     'def test_b(helper):\n    pass\n'
                     'def test_c():\n    edgebuild("plan", "x")\n')
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert _runners(functions, set()) == {"helper", "test_a", "test_b"}
