"""A stage is a pure function of its key: the modules a carried `file.py` imports from its
own folder (they travel with it, execute/remote/carry.py) are in the key too, so editing one
rebuilds the stage; a file beside it that nothing imports does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.cache.store import Store
from edgebuild.plan.planner import build_plan
from edgebuild.plan.resolve import KeyResolver
from edgebuild.recipe.loader import load_recipe

RECIPE = """\
name: tuned
model: {factory: models/net.py:build}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
datasets:
  d: {kind: callable, function: data/make.py:load}
passes: [prune: {ratio: 0.5, finetune: "hooks/tune.py:fit"}, export-onnx]
targets:
  host-cpu:
    gates: {accuracy: {dataset: d, min_top1_agreement: 99}}
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "models/net.py", "from layers import block\ndef build():\n    return None\n")
    write(tmp_path / "models/layers.py", "def block():\n    return 1\n")
    write(tmp_path / "hooks/tune.py", "import loop\ndef fit(model):\n    return model\n")
    write(tmp_path / "hooks/loop.py", "from helpers import lr\n")  # a sibling's sibling
    write(tmp_path / "hooks/helpers/__init__.py", "lr = 0.1\n")  # a package beside it
    write(tmp_path / "data/make.py", "from decode import read\ndef load():\n    return read()\n")
    write(tmp_path / "data/decode.py", "def read():\n    return None\n")
    for folder in ("models", "hooks", "data"):
        write(tmp_path / folder / "unrelated.py", "x = 1\n")  # imported by nothing
    write(tmp_path / "r.yaml", RECIPE)
    return tmp_path


def keys(project: Path) -> dict[str, str]:
    plan = build_plan(load_recipe(project / "r.yaml"))
    resolver = KeyResolver(plan, Store(project / "cache"))
    return {stage.id: resolver.key(stage, {}) for stage in plan.order()}


@pytest.mark.parametrize(("sibling", "stages"), [
    ("hooks/loop.py", {"prune"}),  # prune's finetune, through a sibling it imports
    ("hooks/helpers/__init__.py", {"prune"}),  # ... and a package that one imports
    ("models/layers.py", {"prune"}),  # the factory's (prune reads the model source)
    ("data/decode.py", {"reference"}),  # the dataset function's
])
def test_editing_an_imported_sibling_changes_the_key(project: Path, sibling: str,
                                                     stages: set[str]) -> None:
    before = keys(project)
    assert keys(project) == before  # stable
    (project / sibling).write_text((project / sibling).read_text() + "# edited, longer\n")
    after = keys(project)
    changed = {sid for sid in before if before[sid] != after[sid]}
    assert stages <= changed, changed


def test_editing_an_unrelated_file_beside_it_changes_no_key(project: Path) -> None:
    before = keys(project)
    for folder in ("models", "hooks", "data"):
        (project / folder / "unrelated.py").write_text("x = 2  # edited, and longer\n")
    (project / "hooks" / "notes.txt").write_text("not code\n")
    assert keys(project) == before


def test_custom_op_kernel_siblings_are_keyed(tmp_path: Path) -> None:
    from edgebuild.customops.files import custom_op_files
    from edgebuild.recipe.custom_ops import CustomOp

    write(tmp_path / "ops/kernel.py", "from maths import gelu\ndef torch_op():\n    pass\n")
    write(tmp_path / "ops/maths.py", "def gelu():\n    pass\n")
    write(tmp_path / "ops/unrelated.py", "x = 1\n")
    op = CustomOp.model_validate({
        "domain": "com.example.research", "torch_op": "ops/kernel.py:torch_op",
        "onnx_schema": {"inputs": ["x"], "outputs": ["y"]},
        "decomposition": "ops/kernel.py:decompose"})
    files = custom_op_files({"Gelu": op}, tmp_path)
    assert files[("Gelu", "torch_op/maths.py")] == (tmp_path / "ops/maths.py").resolve()
    assert ("Gelu", "decomposition/maths.py") in files
    assert not any("unrelated" in role for _, role in files)
