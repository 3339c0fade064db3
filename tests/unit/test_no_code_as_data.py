"""No artifact is ever deserialised into code (issue 28.1, docs/security.md).

A stage reads what an earlier stage wrote, and that may come from a shared store
others can write. So edgebuild never unpickles: every `torch.load` passes
`weights_only=True`, no `pickle`/`dill`/`joblib`/`cloudpickle` load appears, and no
`np.load` allows pickles. A source scan keeps it so."""

from __future__ import annotations

import ast
from pathlib import Path

EDGEBUILD = Path(__file__).resolve().parents[2] / "edgebuild"
UNPICKLERS = {("pickle", "load"), ("pickle", "loads"), ("pickle", "Unpickler"),
              ("dill", "load"), ("dill", "loads"), ("joblib", "load"),
              ("cloudpickle", "load"), ("cloudpickle", "loads"), ("marshal", "loads")}
# TorchScript is code for the TorchScript interpreter. The one place that loads it:
# Core ML's accuracy proxy (a compile stage's output) — reported in issue 28 as the
# remaining artifact that is not plain data; a new one fails this test.
JIT_LOADS = {"backends/coreml/proxy.py"}


def calls() -> list[tuple[str, int, str, str, ast.Call]]:
    found = []
    for file in sorted(EDGEBUILD.rglob("*.py")):
        tree = ast.parse(file.read_text(), str(file))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                name = (owner.id if isinstance(owner, ast.Name) else
                        f"{owner.value.id}.{owner.attr}" if isinstance(owner, ast.Attribute)
                        and isinstance(owner.value, ast.Name) else "")
                found.append((file.relative_to(EDGEBUILD).as_posix(), node.lineno, name,
                              node.func.attr, node))
    return found


def keyword(call: ast.Call, name: str) -> object:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value.value if isinstance(kw.value, ast.Constant) else kw.value
    return None


def test_every_torch_load_is_weights_only() -> None:
    loads = [(f, n, c) for f, n, owner, attr, c in calls() if (owner, attr) == ("torch", "load")]
    assert loads, "the scan found no torch.load at all: is it still looking at edgebuild/?"
    bad = [f"{f}:{n}" for f, n, c in loads if keyword(c, "weights_only") is not True]
    assert bad == [], f"torch.load without weights_only=True: {bad}"


def test_nothing_unpickles() -> None:
    bad = [f"{f}:{n} {owner}.{attr}" for f, n, owner, attr, _ in calls()
           if (owner, attr) in UNPICKLERS]
    assert bad == []


def test_no_np_load_allows_pickles() -> None:
    bad = [f"{f}:{n}" for f, n, owner, attr, c in calls()
           if owner in ("np", "numpy") and attr == "load"
           and keyword(c, "allow_pickle") not in (None, False)]
    assert bad == []


def test_torchscript_loads_only_where_known() -> None:
    where = {f for f, _, owner, attr, _ in calls() if (owner, attr) == ("torch.jit", "load")}
    assert where <= JIT_LOADS, f"a new torch.jit.load (TorchScript is code): {where}"
