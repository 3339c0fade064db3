"""Custom ops (recipe `custom_ops:`): the schema, plan-time kernel coverage, stage keys and
carrying, ONNX schema registration, and export-onnx in both modes on the shipped recipe's
real local-window-attention op (recipes/models/window_attention*.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from edgebuild.errors import DataError, RecipeError, StageError
from edgebuild.recipe.custom_ops import CustomOp
from edgebuild.recipe.loader import LoadedRecipe, load_recipe
from tests.conftest import REPO

RECIPE = REPO / "recipes" / "custom-op-attention.yaml"
MODELS = REPO / "recipes" / "models"


def variant(tmp_path: Path, old: str = "", new: str = "", name: str = "r.yaml") -> Path:
    """The shipped recipe with one edit, its model files named by absolute path."""
    text = RECIPE.read_text().replace("models/", f"{MODELS}/")
    if old:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    return [str(p) for p in info.value.problems]


def declaration(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "domain": "com.example.research", "torch_op": "ops.py:op",
        "onnx_schema": {"inputs": ["x"], "outputs": ["y"], "attributes": {"n": "int"}},
        "decomposition": "ops.py:decompose"}
    return {**base, **changes}


# --- the schema -------------------------------------------------------------------------


def test_declaration_defaults() -> None:
    op = CustomOp.model_validate(declaration())
    assert op.export.value == "custom" and op.version == 1
    assert op.onnx_schema.types == ["float32"]
    assert not op.decomposes_for("onnxruntime")
    assert CustomOp.model_validate(declaration(export="decompose")).decomposes_for("openvino")


@pytest.mark.parametrize("changes,message", [
    ({"domain": "ai.onnx.contrib"}, "belongs to a runtime's own ops"),
    ({"domain": "com..x"}, "should match pattern"),
    ({"export": "decompose", "decomposition": None}, "needs `decomposition:`"),
    ({"kernels": {"tflite": "decompose"}, "decomposition": None},
     "kernels tflite: decompose needs `decomposition:`"),
    ({"kernels": {"tflite": {"python": "k.py:f"}}}, "Input should be 'decompose'"),
    ({"kernels": {"onnxruntime": {"python": "k.py:f", "library": "k.so"}}},
     "exactly one of `python` or `library`"),
    ({"kernels": {"onnxruntime": {"python": "k.py:f"}},
      "onnx_schema": {"inputs": ["x"], "outputs": ["y"], "attributes": {"n": "ints"}}},
     "take only int, float and string"),
    ({"torch_op": "no-colon"}, "names no callable"),
    ({"onnx_schema": {"inputs": ["x"], "outputs": ["x"]}}, "names used twice"),
])
def test_bad_declarations_say_why(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CustomOp.model_validate(declaration(**changes))


# --- validation against the recipe's targets (plan time, file:line) ----------------------


def test_shipped_recipe_loads_and_plans_two_exports() -> None:
    from edgebuild.plan.planner import build_plan

    loaded = load_recipe(RECIPE)
    plan = build_plan(loaded)
    exports = {s.id: s.params for s in plan.order() if s.op == "export-onnx"}
    # host-cpu and intel-cpu share the export with the custom node; android gets its own.
    assert exports == {"export-onnx": {**exports["export-onnx"], "decompose_custom_ops": []},
                       "export-onnx#2": {**exports["export-onnx#2"],
                                         "decompose_custom_ops": ["LocalWindowAttention"]}}
    assert plan.targets["host-cpu"].chain == plan.targets["intel-cpu"].chain
    assert "export-onnx#2" in plan.targets["android"].chain
    assert all(s.custom_ops for s in plan.order())


def test_a_target_without_kernel_fails_validation_at_the_kernels_line(tmp_path: Path) -> None:
    path = variant(tmp_path, "      tflite: decompose                 # onnx2tf has no "
                   "custom-op hook\n", "")
    found = problems(path)
    assert len(found) == 1
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1)
                if text.strip() == "kernels:")
    assert found[0].startswith(f"{path}:{line}:")
    assert "custom_ops.LocalWindowAttention.kernels" in found[0]
    assert "no kernel or decomposition for backend 'tflite'" in found[0]
    assert "target 'android'" in found[0]
    assert "add `kernels.tflite:`" in found[0]


def test_the_cli_exits_2_naming_the_missing_kernel(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = variant(tmp_path, "      openvino: {conversion: ", "      # openvino: {conversion: ")
    proc = subprocess.run([sys.executable, "-m", "edgebuild", "plan", str(path)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2, proc.stderr
    assert "no kernel or decomposition for backend 'openvino'" in proc.stderr
    assert "target 'intel-cpu'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_core_ml_target_is_refused_clearly(tmp_path: Path) -> None:
    path = variant(tmp_path, "targets:\n", "targets:\n  iphone: {}\n")
    (found,) = problems(path)
    assert "cannot be built for backend 'coreml'" in found and "MIL composition" in found


def test_export_decompose_needs_no_kernels(tmp_path: Path) -> None:
    text = variant(tmp_path).read_text()
    start, end = text.index("    kernels:\n"), text.index("\ndatasets:")
    path = tmp_path / "decomposed.yaml"
    path.write_text(text[:start].replace("export: custom", "export: decompose") + text[end:])
    from edgebuild.plan.planner import build_plan

    plan = build_plan(load_recipe(path))
    exports = [s.params for s in plan.order() if s.op == "export-onnx"]
    assert [e["decompose_custom_ops"] for e in exports] == [["LocalWindowAttention"]]


def test_dynamo_exporter_and_onnx_sources_are_refused(tmp_path: Path) -> None:
    found = problems(variant(tmp_path, "export-onnx: {opset: 17}",
                             "export-onnx: {opset: 18, exporter: dynamo}"))
    assert any("legacy exporter" in p and "passes.0.export-onnx.exporter" in p for p in found)
    path = variant(tmp_path, "  factory: ", "  onnx: m.onnx\n  # ")
    path.write_text(path.read_text().replace("  weights: ", "  # weights: "))
    found = problems(path)
    assert any("custom ops are declared for a PyTorch model" in p for p in found)


# --- keys and carrying ---------------------------------------------------------------------


def loaded_copy(tmp_path: Path) -> tuple[LoadedRecipe, Path]:
    """The shipped recipe and its model files copied to tmp_path (files we may edit)."""
    import shutil

    shutil.copytree(MODELS, tmp_path / "models", ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE.read_text())
    return load_recipe(path), path


def test_kernel_file_edits_change_every_stage_key(tmp_path: Path) -> None:
    from edgebuild.cache.store import Store
    from edgebuild.plan.planner import build_plan
    from edgebuild.plan.resolve import KeyResolver

    loaded, _ = loaded_copy(tmp_path)
    plan = build_plan(loaded)
    store = Store(tmp_path / "cache")
    export = plan.stage("export-onnx")
    before = KeyResolver(plan, store).key(export, {})
    assert KeyResolver(plan, store).key(export, {}) == before
    kernels = tmp_path / "models" / "window_attention_kernels.py"
    kernels.write_text(kernels.read_text() + "\n# a changed kernel\n")
    assert KeyResolver(plan, store).key(export, {}) != before
    kernels.unlink()
    with pytest.raises(DataError, match=r"window_attention_kernels\.py not found"):
        _ = KeyResolver(plan, store).custom_ops_digest


def test_kernel_files_travel_with_the_stage(tmp_path: Path) -> None:
    from edgebuild.execute.remote.carry import carry
    from edgebuild.execute.task import stage_spec
    from edgebuild.plan.planner import build_plan

    loaded, _ = loaded_copy(tmp_path)
    plan = build_plan(loaded)
    spec = stage_spec(plan, plan.stage("compile@host-cpu"), {}, tmp_path / "out")
    carried = carry(spec)
    op = carried.spec["custom_ops"]["LocalWindowAttention"]
    assert op["torch_op"] == "carried/model/window_attention.py:local_window_attention"
    assert op["kernels"]["onnxruntime"]["python"] == \
        "carried/model/window_attention_kernels.py:onnxruntime_kernel"
    assert op["kernels"]["openvino"]["conversion"].startswith("carried/model/window_attention_k")
    assert op["decomposition"].startswith("carried/model/window_attention_kernels.py:")
    assert op["kernels"]["tflite"] == "decompose"
    assert set(carried.files) == {"carried/model/window_attention.py",
                                  "carried/model/window_attention_kernels.py"}


# --- ONNX schema registration ----------------------------------------------------------------


def test_registered_schema_lets_the_checker_read_the_node() -> None:
    import onnx
    from onnx import TensorProto, helper

    from edgebuild.customops.onnx_schema import register

    op = CustomOp.model_validate(declaration(domain="com.example.schematest"))

    def model(attributes: dict[str, Any]) -> Any:
        node = helper.make_node("Twice", ["x"], ["y"], domain="com.example.schematest",
                                **attributes)
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        return helper.make_model(graph, opset_imports=[
            helper.make_opsetid("", 17), helper.make_opsetid("com.example.schematest", 1)])

    assert register({"Twice": op}) == ["com.example.schematest::Twice"]
    assert register({"Twice": op}) == ["com.example.schematest::Twice"]  # idempotent
    onnx.checker.check_model(model({"n": 3}), full_check=True)
    with pytest.raises(onnx.checker.ValidationError, match="Required attribute 'n'"):
        onnx.checker.check_model(model({}), full_check=True)
    # A changed declaration replaces the schema (a second input).
    changed = CustomOp.model_validate(declaration(
        domain="com.example.schematest",
        onnx_schema={"inputs": ["x", "scale"], "outputs": ["y"], "attributes": {"n": "int"}}))
    register({"Twice": changed})
    schema = onnx.defs.get_schema("Twice", 1, "com.example.schematest")
    assert [i.name for i in schema.inputs] == ["x", "scale"]


# --- export-onnx in both modes, on the real op ----------------------------------------------


def export(tmp_path: Path, ops: dict[str, Any] | None, **params: Any) -> tuple[Any, Any]:
    """Run export-onnx as a stage would (its custom ops activated); returns
    (the ONNX model, the stage metadata)."""
    import onnx

    from edgebuild.customops.declared import activated
    from edgebuild.execute.worker import context_from_recipe
    from edgebuild.passes.export_onnx import ExportOnnx, ExportParams

    recipe = load_recipe(RECIPE).recipe
    data = {"model": recipe.model.model_dump(mode="json"),
            "inputs": [t.model_dump(mode="json") for t in recipe.inputs],
            "outputs": recipe.outputs}
    out = tmp_path / "export"
    out.mkdir(exist_ok=True)
    ctx = context_from_recipe("export-onnx", {}, out, data, RECIPE.parent)
    with activated(ops, RECIPE.parent):
        result = ExportOnnx().run(ctx, ExportParams(**params))
    return onnx.load(str(out / result.main)), result.metadata


def declared_ops() -> dict[str, Any]:
    recipe = load_recipe(RECIPE).recipe
    return {n: op.model_dump(mode="json") for n, op in recipe.custom_ops.items()}


def test_custom_mode_writes_one_node_in_the_declared_domain(tmp_path: Path) -> None:
    model, meta = export(tmp_path, declared_ops())
    custom = [n for n in model.graph.node if n.domain == "com.example.research"]
    assert [n.op_type for n in custom] == ["LocalWindowAttention"]
    assert [(a.name, a.i) for a in custom[0].attribute] == [("window", 2)]
    assert {i.domain: i.version for i in model.opset_import}["com.example.research"] == 1
    # The check ran the node with the ONNX Runtime kernel against PyTorch.
    assert meta["check"]["samples"] == 2 and meta["check"]["max_abs_diff"] < 1e-4
    assert meta["custom_ops"] == {
        "edgebuild_demo::local_window_attention": "com.example.research::LocalWindowAttention"}


def test_decompose_mode_writes_standard_ops_that_match_pytorch(tmp_path: Path) -> None:
    import onnxruntime as ort
    import torch

    from edgebuild.passes.torch_model import build_torch_model

    model, meta = export(tmp_path, declared_ops(),
                         decompose_custom_ops=["LocalWindowAttention"])
    assert {n.domain for n in model.graph.node} == {""}
    assert "Softmax" in {n.op_type for n in model.graph.node}
    session = ort.InferenceSession(model.SerializeToString())  # no kernel needed
    x = np.random.default_rng(0).standard_normal((3, 1, 28, 28)).astype(np.float32)
    torch_model = build_torch_model(load_recipe(RECIPE).recipe.model.model_dump(mode="json"),
                                    RECIPE.parent)
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(x)).numpy()
    got = session.run(None, {"image": x})[0]
    assert np.abs(got - expected).max() < 1e-4
    assert meta["custom_ops"]["edgebuild_demo::local_window_attention"].startswith(
        "decomposition ")


@pytest.mark.slow
def test_an_undeclared_op_fails_the_export_naming_it(tmp_path: Path) -> None:
    """Through the CLI: a fresh process, as a real run (torch keeps symbolics per process)."""
    import subprocess
    import sys

    text = variant(tmp_path).read_text()
    start, end = text.index("\ncustom_ops:"), text.index("\ndatasets:")
    path = tmp_path / "undeclared.yaml"
    path.write_text(text[:start] + text[end:])
    proc = subprocess.run(
        [sys.executable, "-m", "edgebuild", "run", str(path), "--target", "host-cpu",
         "--out", str(tmp_path / "out")], capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO),
             "EDGEBUILD_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    output = proc.stdout + proc.stderr
    assert "stage 'export-onnx' failed: the ONNX export failed: torch op " \
        "'edgebuild_demo::local_window_attention' has no ONNX registration" in output
    assert "declare it under `custom_ops:`" in output
    assert "Traceback" not in output


def test_decompose_names_must_be_declared(tmp_path: Path) -> None:
    with pytest.raises(StageError, match="decompose_custom_ops names \\['Nope'\\]"):
        export(tmp_path, declared_ops(), decompose_custom_ops=["Nope"])


# --- passes on a graph holding a custom node ---------------------------------------------


def exported_artifact(tmp_path: Path) -> Any:
    from edgebuild.core.artifact import Artifact

    export(tmp_path, declared_ops())
    return Artifact("0" * 64, "onnx", tmp_path / "export", {}, {}, {"main": "model.onnx"})


def run_pass(name: str, params: dict[str, Any], model: Any, out: Path,
             ops: dict[str, Any]) -> Any:
    from edgebuild.customops.declared import activated
    from edgebuild.execute.worker import context_from_recipe
    from edgebuild.registry import load_op

    op = load_op(name)()
    out.mkdir()
    ctx = context_from_recipe(name, {"model": model}, out,
                              {"inputs": [], "outputs": ["logits"]}, RECIPE.parent)
    with activated(ops, RECIPE.parent):
        return op.run(ctx, op.Params.model_validate(params))


def test_onnx_optimize_keeps_the_node_and_checks_it(tmp_path: Path) -> None:
    model = exported_artifact(tmp_path)
    result = run_pass("onnx-optimize", {}, model, tmp_path / "opt", declared_ops())
    assert result.metadata["custom_ops"] == ["LocalWindowAttention"]
    assert result.metadata["after"]["ops"]["LocalWindowAttention"] == 1
    assert "ort_basic_skipped" not in result.metadata  # the ORT kernel let it run
    # Without an ONNX Runtime kernel, the portable clean-up runs without ORT's basic level.
    ops = declared_ops()
    ops["LocalWindowAttention"]["kernels"]["onnxruntime"] = None
    result = run_pass("onnx-optimize", {}, model, tmp_path / "opt2", ops)
    assert result.metadata["ort_basic_skipped"] == \
        "no ONNX Runtime kernel for LocalWindowAttention"


def test_quantize_refuses_a_custom_node_clearly(tmp_path: Path) -> None:
    model = exported_artifact(tmp_path)
    with pytest.raises(StageError) as info:
        run_pass("quantize", {"mode": "dynamic"}, model, tmp_path / "q", declared_ops())
    assert "custom op(s) LocalWindowAttention" in info.value.message
    assert "decompose the op for this target" in info.value.hint


# --- a module class as the torch op ----------------------------------------------------------


MODULE_OP = {"SquaredRelu": {
    "domain": "com.example.activations", "torch_op": "tests/models/squared_relu.py:"
    "ScaledSquaredReLU", "onnx_schema": {"inputs": ["x"], "outputs": ["y"],
                                          "attributes": {"alpha": "float"}},
    "decomposition": "tests/models/squared_relu.py:decomposition",
    "kernels": {"onnxruntime": {"python": "tests/models/squared_relu.py:onnxruntime_kernel"}}}}


def export_module(tmp_path: Path, weighted: bool = False, **params: Any) -> tuple[Any, Any]:
    import onnx

    from edgebuild.customops.declared import activated
    from edgebuild.execute.worker import context_from_recipe
    from edgebuild.passes.export_onnx import ExportOnnx, ExportParams

    data = {"model": {"factory": "tests/models/squared_relu.py:build",
                      "kwargs": {"weighted": weighted}},
            "inputs": [{"name": "x", "shape": [2, 4], "dtype": "float32", "dynamic_axes": {}}],
            "outputs": ["y"]}
    out = tmp_path / "export"
    out.mkdir(exist_ok=True)
    ctx = context_from_recipe("export-onnx", {}, out, data, REPO)
    with activated(MODULE_OP, REPO):
        result = ExportOnnx().run(ctx, ExportParams(**params))
    return onnx.load(str(out / result.main)), result.metadata


def test_a_module_class_exports_as_a_custom_node(tmp_path: Path) -> None:
    model, meta = export_module(tmp_path)
    (node,) = [n for n in model.graph.node if n.domain == "com.example.activations"]
    assert node.op_type == "SquaredRelu"
    assert [(a.name, round(a.f, 6)) for a in node.attribute] == [("alpha", 0.5)]
    assert meta["check"]["samples"] == 2 and meta["check"]["max_abs_diff"] < 1e-5
    assert meta["custom_ops"] == {"_edgebuild_user_squared_relu.ScaledSquaredReLU":
                                  "com.example.activations::SquaredRelu (1x)"}


def test_a_module_class_exports_as_its_decomposition(tmp_path: Path) -> None:
    model, meta = export_module(tmp_path, decompose_custom_ops=["SquaredRelu"])
    assert {n.domain for n in model.graph.node} == {""}
    assert {"Relu", "Mul"} <= {n.op_type for n in model.graph.node}
    assert meta["check"]["max_abs_diff"] < 1e-5  # plain ONNX Runtime against PyTorch


def test_a_module_class_with_weights_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"holds weights \['gain'\]"):
        export_module(tmp_path, weighted=True)


def test_plan_and_validate_of_the_custom_op_recipe_are_light() -> None:
    from tests.unit.test_light_imports import loaded_heavy

    for argv in (["plan", str(RECIPE)], ["validate", str(RECIPE)]):
        code, heavy, output = loaded_heavy(argv, cwd=REPO)
        assert code == 0, output
        assert heavy == [], argv


def test_search_candidates_get_the_export_their_backend_needs(tmp_path: Path) -> None:
    from edgebuild.plan.planner import build_plan

    path = variant(tmp_path, "targets:\n", """targets:
  searched:
    profile: intel-cpu
    gates: {accuracy: {dataset: test, max_abs_error: 1.0e-4}}
    search:
      candidates:
        fp32: {}
        threads: {options: {inference_num_threads: 1}}
""")
    plan = build_plan(load_recipe(path))
    search = plan.targets["searched"].search
    assert search is not None
    for stages in search.candidates.values():
        export = plan.stage(stages.chain[0])
        assert export.op == "export-onnx" and export.params["decompose_custom_ops"] == []
    assert search.candidates["fp32"].chain[0] == plan.targets["host-cpu"].chain[0]


# --- a Python kernel that fails -----------------------------------------------------------

KERNEL_RUN = """\
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from edgebuild.customops.declared import activated
from edgebuild.customops.ort import session
from edgebuild.errors import StageError

folder = Path(sys.argv[1])
node = helper.make_node("Boom", ["x"], ["y"], domain="com.example.test")
graph = helper.make_graph(
    [node, helper.make_node("Relu", ["y"], ["z"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
    [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.example.test", 1)])
op = {"domain": "com.example.test", "torch_op": "ops.py:op",
      "onnx_schema": {"inputs": ["x"], "outputs": ["y"]},
      "kernels": {"onnxruntime": {"python": sys.argv[2]}}}
with activated({"Boom": op}, folder):
    ran = session(model)
    try:
        ran.run(None, {"x": np.ones((1, 4), np.float32)})
    except StageError as exc:
        print("STAGE ERROR:", exc)
    else:
        print("NO ERROR")
"""


@pytest.mark.parametrize(("kernel", "wanted"), [
    ("def boom(x):\n    raise ValueError('window larger than the input: 7 > 4')\n",
     "custom op 'Boom': its ONNX Runtime kernel kernel.py:boom raised ValueError: window "
     "larger than the input: 7 > 4"),
    ("def boom(x):\n    return [x]\n",
     "raised TypeError: the kernel returned list; the op has 1 output: return one numpy "
     "array"),
])
def test_a_python_kernel_exception_is_reported_not_a_sigabrt(tmp_path: Path, kernel: str,
                                                             wanted: str) -> None:
    """onnxruntime-extensions turns a kernel's exception into std::terminate: the stage
    used to die as "killed by SIGABRT" with nothing else said."""
    import subprocess
    import sys

    pytest.importorskip("onnxruntime_extensions", reason="Python kernels need it")
    (tmp_path / "kernel.py").write_text(kernel)
    proc = subprocess.run([sys.executable, "-c", KERNEL_RUN, str(tmp_path), "kernel.py:boom"],
                          capture_output=True, text=True, check=False, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "STAGE ERROR: custom op 'Boom'" in proc.stdout and wanted in proc.stdout, proc.stdout
    assert "the kernel's traceback is in the stage log" in proc.stdout
    assert "Traceback" in proc.stderr and "kernel.py" in proc.stderr  # for the stage log
