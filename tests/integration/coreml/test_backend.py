"""The Core ML backend for real: PyTorch -> .mlpackage (fp16, int8 weights, palette),
the op / Neural Engine table, the weight-compression proxy gated here, "needs macOS"
for latency, and a traced control-flow model caught instead of silently frozen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FASHION, REPO, edgebuild, fashion_recipe

pytestmark = [pytest.mark.coreml, pytest.mark.slow]

SIGN_GATE = REPO / "tests" / "models" / "sign_gate.py"  # data-dependent control flow

IPHONE_TARGETS = """
targets:
  iphone:
    inherit_passes: false
    policy: {unmeasurable: warn}
    gates:
      accuracy: {dataset: test, min_top1: 88, max_top1_drop: 1}
      latency: {budget_ms: 2}
      size: {max_mb: 1}
  iphone-int8:
    profile: iphone
    inherit_passes: false
    options: {weights: int8}
    gates:
      accuracy: {dataset: test, min_top1: 88, max_top1_drop: 1}
      size: {max_mb: 0.2}
  iphone-int8-block:             # iOS 18's per-block scales, one layer kept float16
    profile: iphone
    inherit_passes: false
    options: {weights: int8, granularity: per_block, block_size: 8, int8_mode: linear,
              minimum_deployment_target: iOS18, keep_float: [/features/features.6/Conv]}
    gates:
      accuracy: {dataset: test, min_top1: 88, max_top1_drop: 1}
  iphone-palette:
    profile: iphone
    inherit_passes: false
    options: {weights: palettize, palettize_bits: 4}
    gates:
      accuracy: {dataset: test, min_top1: 86, max_top1_drop: 3}
      size: {max_mb: 0.1}
"""


def report_of(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "report.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def fashion_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not FASHION.is_dir():
        pytest.skip("needs Debian's dataset-fashion-mnist")
    folder = tmp_path_factory.mktemp("coreml")
    recipe = folder / "fashion-coreml.yaml"
    recipe.write_text(fashion_recipe("fashion-coreml", test_limit=500) + IPHONE_TARGETS)
    result = edgebuild("run", str(recipe), "--out", str(folder / "out"), "--cache-dir",
                       str(folder / "cache"))  # the module's own: built once, for every test
    assert result.returncode == 0, result.stdout + result.stderr
    return folder


def test_fashion_mnist_builds_for_iphone_and_gates_the_proxy(fashion_build: Path) -> None:
    out = fashion_build / "out"
    report = report_of(out)
    for target in ("iphone", "iphone-int8", "iphone-palette"):
        package = out / "artifacts" / target / "model.mlpackage"
        assert (package / "Manifest.json").is_file()
    stages = {s["id"]: s for s in report["stages"]}
    fp16 = stages["compile@iphone"]["metadata"]
    assert fp16["capture_check"]["capture"] == "export"
    assert fp16["program"]["flexible_inputs"] == ["image"]
    # 4 undilated convs + 2 small max-pools: decided from their constants, with a source.
    assert fp16["program"]["by_status"]["ane"] == 6
    note = (out / "artifacts" / "iphone" / "coreml_program.md").read_text()
    assert "| max_pool (small) | float16 | 2 | ane |" in note and "hollance/neural-engine" in note
    int8 = stages["compile@iphone-int8"]["metadata"]
    assert int8["program"]["weight_ops"] == {"constexpr_affine_dequantize": 4}
    block = stages["compile@iphone-int8-block"]["metadata"]
    assert block["program"]["weight_ops"] == {"constexpr_blockwise_shift_scale": 3}
    assert block["proxy"]["kept_float_weights"] == 1
    assert block["kept_float"]["nodes"] == ["/features/features.6/Conv"]
    palette = stages["compile@iphone-palette"]["metadata"]
    assert palette["program"]["weight_ops"] == {"constexpr_lut_to_dense": 4}
    # What ships is the package; its size shrinks with the compression.
    assert palette["package_bytes"] < int8["package_bytes"] < fp16["package_bytes"]
    gates = {(t["name"], g["gate"]): g for t in report["targets"] for g in t["gates"]}
    accuracy = gates[("iphone-int8", "accuracy")]
    assert accuracy["status"] == "passed"
    assert "weight-compression proxy" in accuracy["message"]
    assert "not Core ML numerics" in accuracy["details"]["where"]
    latency = gates[("iphone", "latency")]
    assert latency["status"] == "unmeasurable" and "needs macOS" in latency["message"]
    assert gates[("iphone", "size")]["measured"]["mb"] * 1e6 == pytest.approx(
        fp16["package_bytes"], rel=1e-3)
    assert "Core ML program" in (out / "summary.md").read_text()


def test_a_second_run_executes_nothing(fashion_build: Path) -> None:
    recipe = fashion_build / "fashion-coreml.yaml"
    again = edgebuild("run", str(recipe), "--out", str(fashion_build / "out"), "--cache-dir",
                      str(fashion_build / "cache"))
    assert again.returncode == 0, again.stdout + again.stderr
    rerun = report_of(fashion_build / "out")["stages"]
    # Only "is this a Mac now?" is asked again (the latency stage's unmeasurable answer).
    assert {s["outcome"] for s in rerun if not s["cached"]} <= {"unmeasurable"}


def _decompressed_weights(package: Path) -> list[np.ndarray]:
    """The weights Core ML will use, decompressed from the package's MIL program."""
    from edgebuild.backends.coreml.convert import quiet_coremltools

    with quiet_coremltools() as ct:
        from coremltools.converters.mil.frontend.milproto.load import load

        spec = ct.models.MLModel(str(package), skip_model_load=True).get_spec()
        program = load(spec, spec.specificationVersion,
                       str(package / "Data" / "com.apple.CoreML" / "weights"))
        return [op.materialized_val_inference().astype(np.float32)
                for op in program.functions["main"].operations
                if op.op_type.startswith("constexpr_")]


def _steps_apart(package: np.ndarray, proxy: np.ndarray, block: int, mode: str) -> float:
    """How many of the package's int8 steps its weights and the proxy's are apart, per
    output channel (`block` 0) or block of input channels. coremltools folds batch norm
    first: a scale per output channel (sign included) the quantization does not see, fitted
    here by least squares."""
    def grouped(w: np.ndarray) -> np.ndarray:
        return w.reshape(w.shape[0], w.shape[1] // block if block else 1, -1)

    a, b = grouped(package).astype(np.float64), grouped(proxy).astype(np.float64)
    fold = (a * b).sum(axis=(1, 2), keepdims=True) / (b * b).sum(axis=(1, 2), keepdims=True)
    if mode == "linear_symmetric":
        step = np.abs(a).max(axis=2, keepdims=True) / 127
    else:
        step = (np.maximum(a.max(axis=2, keepdims=True), 0)
                - np.minimum(a.min(axis=2, keepdims=True), 0)) / 255
    return float((np.abs(a - fold * b) / step).max())


@pytest.mark.parametrize(("target", "block", "mode", "kept"), [
    ("iphone-int8", 0, "linear_symmetric", None),
    ("iphone-int8-block", 8, "linear", "features.6.weight")])
def test_the_int8_proxy_has_the_packages_weights(fashion_build: Path, target: str, block: int,
                                                 mode: str, kept: str | None) -> None:
    """Per output channel or per block, the proxy's weights are the package's to within
    one int8 step (coremltools folds batch norm first: a per-channel scale the
    quantization ignores); a `keep_float` layer is float16 in both."""
    import torch

    artifact = fashion_build / "out" / "artifacts" / target
    proxy = torch.jit.load(str(artifact / "proxy" / "model.ts"))  # fp16 parameters
    by_shape = {tuple(p.shape): p.detach().float().numpy() for p in proxy.parameters()}
    original = torch.load(REPO / "recipes" / "models" / "fashion_mnist_cnn.pt",
                          weights_only=True)
    compressed = _decompressed_weights(artifact / "model.mlpackage")
    for weight in compressed:
        assert _steps_apart(weight, by_shape[weight.shape], block, mode) <= 1.5
    if kept is None:
        assert len(compressed) == 4
        return
    shape = tuple(original[kept].shape)
    assert len(compressed) == 3 and shape not in {w.shape for w in compressed}
    assert np.array_equal(by_shape[shape], original[kept].half().float().numpy())


@pytest.mark.parametrize("capture", ["trace", "script", "export"])
def test_control_flow_is_caught_when_traced(tmp_path: Path, capture: str) -> None:
    recipe = tmp_path / "flow.yaml"
    recipe.write_text(f"""\
name: flow
model: {{factory: {SIGN_GATE}:build}}
inputs: [{{name: x, shape: [1, 8]}}]
outputs: [y]
targets:
  iphone:
    options: {{capture: {capture}}}
    policy: {{unmeasurable: warn}}
    gates: {{size: {{max_mb: 1}}}}
""")
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"))
    if capture == "script":  # TorchScript keeps the `if`: a MIL `cond` op
        assert result.returncode == 0, result.stdout + result.stderr
        stages = {s["id"]: s for s in report_of(tmp_path / "out")["stages"]}
        note = (tmp_path / "out" / "artifacts" / "iphone" / "coreml_program.md").read_text()
        assert stages["compile@iphone"]["metadata"]["capture_check"]["samples"] == 4
        assert "| cond |" in note
        return
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    if capture == "trace":
        assert "the traced model differs from eager PyTorch" in result.stderr
    else:
        assert "capture: export failed" in result.stderr
    assert "capture: script" in result.stderr  # the hint names the mode that works


def test_torchscript_with_dynamic_axes_needs_bounds(tmp_path: Path) -> None:
    if not FASHION.is_dir():
        pytest.skip("needs Debian's dataset-fashion-mnist")
    recipe = tmp_path / "bounds.yaml"
    recipe.write_text(fashion_recipe("bounds", test_limit=10) + """
targets:
  iphone:
    inherit_passes: false
    options: {capture: trace}
    gates: {size: {max_mb: 1}}
""")
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"))
    assert result.returncode == 3
    assert "has dynamic axes [0]" in result.stderr and "shape_range_max" in result.stderr


HEAT_NET = REPO / "tests" / "integration" / "shapes" / "heat_net.py"  # any H and W


def test_shape_profiles_are_the_torchscript_shapes(tmp_path: Path) -> None:
    """A traced model with dynamic H/W converts at the recipe's shape profiles: several
    become enumerated shapes (what the Neural Engine prefers to ranges), a target's
    single profile a fixed shape. The accuracy proxy is gated at both sizes."""
    import coremltools as ct

    rng = np.random.default_rng(0)
    for name, (h, w) in {"small": (16, 24), "large": (64, 96)}.items():
        np.savez(tmp_path / f"{name}.npz", image=rng.random((2, 3, h, w), dtype=np.float32))
    recipe = tmp_path / "heat.yaml"
    recipe.write_text(f"""\
name: heat
model: {{factory: {HEAT_NET}:build}}
inputs: [{{name: image, shape: [1, 3, 32, 48], dynamic_axes: {{2: height, 3: width}}}}]
outputs: [heat]
shapes:
  small: {{height: 16, width: 24}}
  large: {{height: 64, width: 96}}
datasets:
  small: {{kind: npz, path: small.npz, arrays: {{image: image}}}}
  large: {{kind: npz, path: large.npz, arrays: {{image: image}}}}
targets:
  iphone:
    options: {{capture: trace}}
    policy: {{unmeasurable: warn}}
    gates:
      accuracy:
        - {{dataset: small, task: dense, max_abs_error: 0.01}}
        - {{dataset: large, task: dense, max_abs_error: 0.01}}
  iphone-large:
    profile: iphone
    shapes: [large]
    options: {{capture: trace}}
    gates: {{accuracy: {{dataset: large, task: dense, max_abs_error: 0.01}}}}
""")
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    artifacts = tmp_path / "out" / "artifacts"

    def input_shape(target: str) -> object:
        spec = ct.utils.load_spec(str(artifacts / target / "model.mlpackage"))
        return spec.description.input[0].type.multiArrayType

    both = input_shape("iphone")
    assert [list(s.shape) for s in both.enumeratedShapes.shapes] == [[1, 3, 16, 24],
                                                                    [1, 3, 64, 96]]
    large = input_shape("iphone-large")
    assert list(large.shape) == [1, 3, 64, 96] and not large.enumeratedShapes.shapes


def test_nms_in_the_graph_is_refused_at_validation(tmp_path: Path) -> None:
    """The detector's in-graph NMS cannot reach Core ML faithfully: a recipe error that
    names the line, not a build that freezes the boxes its example kept."""
    recipe = tmp_path / "detector.yaml"
    recipe.write_text((REPO / "recipes" / "detector.yaml").read_text().replace(
        "models/mtcnn_pnet.py", str(REPO / "recipes" / "models" / "mtcnn_pnet.py")) + """\
  iphone:
    inherit_passes: false
    gates: {size: {max_mb: 1}}
""")
    result = edgebuild("validate", str(recipe))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "model.prepost.detection: target 'iphone' (line" in result.stderr
    assert "cannot build NMS into the model" in result.stderr and "Traceback" not in \
        result.stderr


@pytest.mark.needs_macos
def test_core_ml_predicts_what_the_proxy_predicts_on_a_mac(fashion_build: Path) -> None:
    from edgebuild.backends.coreml.proxy import ProxyRunner
    from edgebuild.backends.coreml.runner import CoreMlRunner

    artifact = fashion_build / "out" / "artifacts" / "iphone"
    io = report_of(fashion_build / "out")
    tensors = [{"name": "image", "shape": [1, 1, 28, 28], "dtype": "float32",
                "dynamic_axes": {"0": "batch"}}]
    feeds = {"image": np.random.default_rng(0).standard_normal((1, 1, 28, 28),
                                                                dtype=np.float32)}
    with CoreMlRunner(artifact / "model.mlpackage", tensors, ["logits"], "all") as mac:
        real = mac.infer(feeds)["logits"]
    with ProxyRunner(artifact / "proxy" / "model.ts", tensors, ["logits"], None,
                     half=True) as proxy:
        guess = proxy.infer(feeds)["logits"]
    assert io and np.allclose(real, guess, atol=0.05)


def test_coremltools_loads_without_the_frameworks_it_only_probes() -> None:
    # coremltools imports TensorFlow, scikit-learn and ExecuTorch at its own import to
    # learn what it may convert from (7 s of 10 here); the PyTorch path needs none, and
    # they are importable again afterwards.
    script = """
import sys
from edgebuild.backends.coreml.convert import UNUSED_FRAMEWORKS, quiet_coremltools
with quiet_coremltools() as ct:
    assert ct.__version__
print(sorted(m for m in UNUSED_FRAMEWORKS if m in sys.modules))
import sklearn
print(sklearn.__name__)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=False, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "sklearn"]
