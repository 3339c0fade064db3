"""Calibration at the declared shapes, and OpenVINO's dynamic IR bounded by the profiles.

The heat-map net (dynamic H/W, example 32×48, profiles 16×24 and 64×96) is
quantized by `quantize` (ONNX Runtime, static QDQ) and `openvino-quantize` (NNCF)
with calibration data at the built shape, at a profile's shape and at a shape no
profile has; and compiled by OpenVINO with `shapes: dynamic`, whose IR is bounded
by the profiles. Real models, real runtimes, through the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import edgebuild

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytest.importorskip("openvino", reason="the OpenVINO backend needs openvino")
pytest.importorskip("nncf", reason="openvino-quantize needs nncf")
pytest.importorskip("torch", reason="the model is exported from PyTorch")

HERE = Path(__file__).parent
MEASURE = "{min_seconds: 0.1, min_iterations: 10, max_busy_share: null}"

RECIPE = f"""\
name: calibration-shapes
model: {{factory: {HERE}/heat_net.py:build}}
inputs: [{{name: image, shape: [1, 3, 32, 48], dynamic_axes: {{2: height, 3: width}}}}]
outputs: [heat]
shapes:
  small: {{height: 16, width: 24}}
  large: {{height: 64, width: 96}}
datasets:
  example: {{kind: npz, path: example.npz, arrays: {{image: image}}}}
  small: {{kind: npz, path: small.npz, arrays: {{image: image}}}}
  large: {{kind: npz, path: large.npz, arrays: {{image: image}}}}
  odd: {{kind: npz, path: odd.npz, arrays: {{image: image}}}}
  huge: {{kind: npz, path: huge.npz, arrays: {{image: image}}}}
targets:
"""

SIZES = {"example": (32, 48), "small": (16, 24), "large": (64, 96), "odd": (20, 30),
         "huge": (128, 192)}


def _target(name: str, body: str) -> str:
    return f"  {name}:\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())


@pytest.fixture
def project(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    for name, (h, w) in SIZES.items():
        np.savez(tmp_path / f"{name}.npz", image=rng.random((8, 3, h, w), dtype=np.float32))
    return tmp_path


def _run(project: Path, targets: str) -> tuple[Any, dict[str, Any]]:
    (project / "recipe.yaml").write_text(RECIPE + targets)
    run = edgebuild("run", str(project / "recipe.yaml"), "--out", str(project / "build"),
                    "--cache", str(project / "cache"), "--keep-going")
    assert "Traceback" not in run.stdout + run.stderr, run.stdout + run.stderr
    return run, json.loads((project / "build" / "report.json").read_text())


def _stage(report: dict[str, Any], prefix: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in report["stages"] if s["id"].startswith(prefix))
    return found


def _gates(report: dict[str, Any], target: str) -> dict[str, dict[str, Any]]:
    return {g["gate"]: g for t in report["targets"] for g in t["gates"]
            if g["target"] == target}


def _ir_input(project: Path, target: str) -> str:
    import openvino as ov

    xml = project / "build" / "artifacts" / target / "model.xml"
    return str(ov.Core().read_model(str(xml)).inputs[0].get_partial_shape())


@pytest.mark.slow
@pytest.mark.openvino
def test_nncf_calibrates_the_static_ir_at_its_built_shape(project: Path) -> None:
    """Before: NNCF calibrated the dynamic model at whatever the data was, and compile
    then fixed the IR at the example shape, silently. Now the IR NNCF calibrates is
    already the static one the target builds, and data at the built shape is used."""
    run, report = _run(project, _target("ov-static", f"""
profile: intel-cpu
options: {{shapes: static}}
passes: [openvino-quantize: {{dataset: example, subset_size: 8}}]
measure: {MEASURE}
gates: {{latency: {{budget_ms: 1000}}}}"""))
    assert run.returncode == 0, run.stdout + run.stderr
    info = _stage(report, "openvino-quantize")["metadata"]["quantization"]
    assert info["ir_shapes"] == {"image": "[1,3,32,48]"}  # NNCF saw the static IR
    assert info["calibration_shapes"] == {"image": [1, 3, 32, 48]}
    assert info["calibration_profile"] is None  # the example size is neither profile
    assert _ir_input(project, "ov-static") == "[1,3,32,48]"
    gates = _gates(report, "ov-static")
    assert gates["latency[small]"]["status"] == gates["latency[large]"]["status"] == "passed"


@pytest.mark.slow
@pytest.mark.openvino
def test_nncf_refuses_data_at_another_shape_than_the_static_ir(project: Path) -> None:
    """Data at the `small` profile (16×24) for an IR built at 32×48: the stage fails
    naming the dataset, its shape and the built shape (before: calibrated silently)."""
    run, report = _run(project, _target("ov-static", f"""
profile: intel-cpu
options: {{shapes: static}}
passes: [openvino-quantize: {{dataset: small, subset_size: 8}}]
measure: {MEASURE}"""))
    assert run.returncode != 0
    stage = _stage(report, "openvino-quantize")
    assert stage["outcome"] == "failed", stage
    assert "calibration dataset 'small' has samples of image [1, 3, 16, 24]" in stage["message"]
    assert "static IR is built at image [1, 3, 32, 48]" in stage["message"]
    assert "shapes: dynamic" in stage["hint"]


@pytest.mark.slow
@pytest.mark.openvino
def test_nncf_on_a_dynamic_target_calibrates_the_bounded_ir(project: Path) -> None:
    """`shapes: dynamic` with profiles: NNCF calibrates the IR bounded by them, on data
    at a profile; the compiled IR keeps the bounds and runs at both profiles."""
    run, report = _run(project, _target("ov-int8", f"""
profile: intel-cpu
options: {{shapes: dynamic}}
passes: [openvino-quantize: {{dataset: large, subset_size: 8}}]
measure: {MEASURE}
gates:
  accuracy: {{dataset: small, task: dense, max_abs_error: 0.1}}
  latency: {{budget_ms: 1000}}"""))
    assert run.returncode == 0, run.stdout + run.stderr
    info = _stage(report, "openvino-quantize")["metadata"]["quantization"]
    assert info["ir_shapes"] == {"image": "[1,3,16..64,24..96]"}
    assert info["calibration_profile"] == "large"
    assert _ir_input(project, "ov-int8") == "[1,3,16..64,24..96]"
    gates = _gates(report, "ov-int8")
    assert gates["latency[small]"]["status"] == gates["latency[large]"]["status"] == "passed"
    assert gates["accuracy"]["status"] == "passed", gates["accuracy"]


@pytest.mark.slow
@pytest.mark.openvino
@pytest.mark.onnxruntime
def test_calibration_at_no_profile_is_refused_by_both_quantizers(project: Path) -> None:
    """20×30 is no profile: `quantize` (its output keeps dynamic axes, timed at every
    profile) and `openvino-quantize` on a dynamic target both fail naming the dataset
    and the profiles."""
    run, report = _run(project, _target("host-int8", """
profile: host-cpu
passes: [quantize: {mode: static, calibration: odd, calibration_samples: 8}]""")
        + _target("ov-int8", """
profile: intel-cpu
options: {shapes: dynamic}
passes: [openvino-quantize: {dataset: odd, subset_size: 8}]"""))
    assert run.returncode != 0
    for prefix in ("quantize", "openvino-quantize"):
        stage = _stage(report, prefix)
        assert stage["outcome"] == "failed", stage
        assert (f"{prefix}: calibration dataset 'odd' has samples of image [1, 3, 20, 30], "
                "which is none of the recipe's shape profiles (small: image [1, 3, 16, 24]; "
                "large: image [1, 3, 64, 96])") in stage["message"], stage["message"]
        assert "add its size to `shapes:`" in stage["hint"]


@pytest.mark.slow
@pytest.mark.onnxruntime
def test_ort_quantize_records_the_profile_it_calibrated_at(project: Path) -> None:
    run, report = _run(project, _target("host-int8", f"""
profile: host-cpu
passes: [quantize: {{mode: static, calibration: small, calibration_samples: 8}}]
measure: {MEASURE}
gates: {{latency: {{budget_ms: 1000}}}}"""))
    assert run.returncode == 0, run.stdout + run.stderr
    meta = _stage(report, "quantize")["metadata"]
    assert meta["calibration_shapes"] == {"image": [1, 3, 16, 24]}
    assert meta["calibration_profile"] == "small"


@pytest.mark.slow
@pytest.mark.openvino
def test_dynamic_ir_is_bounded_by_the_profiles(project: Path) -> None:
    """The compiled `shapes: dynamic` IR has Dimension(min, max) over the profiles; it
    compiles and runs at each profile, and a dataset outside the bounds is a failed
    accuracy row naming the bounds, not OpenVINO's traceback."""
    from edgebuild.backends.openvino.runner import OpenVinoRunner
    from edgebuild.errors import ShapeError

    run, report = _run(project, _target("ov-dynamic", f"""
profile: intel-cpu
options: {{shapes: dynamic}}
measure: {MEASURE}
gates:
  accuracy:
    - {{dataset: large, task: dense, max_abs_error: 0.001}}
    - {{dataset: huge, task: dense, max_abs_error: 0.001}}
  latency: {{budget_ms: 1000}}"""))
    assert run.returncode == 3, run.stdout + run.stderr  # the `huge` infer stage fails
    compiled = _stage(report, "compile@ov-dynamic")["metadata"]
    assert compiled["shapes"] == {"image": "[1,3,16..64,24..96]"}
    gates = _gates(report, "ov-dynamic")
    assert gates["latency[small]"]["status"] == gates["latency[large]"]["status"] == "passed"
    assert gates["accuracy[large]"]["status"] == "passed"
    assert gates["accuracy[huge]"]["status"] == "not-run", gates["accuracy[huge]"]
    huge = _stage(report, "infer@ov-dynamic#2")
    assert huge["outcome"] == "failed", huge
    assert "input 'image' of this dynamic IR takes [1, 3, 16..64, 24..96] (its dynamic " \
        "dims bounded by the recipe's shape profiles); [1, 3, 128, 192] is outside" \
        in huge["message"], huge["message"]
    assert "add a profile of this size to `shapes:`" in huge["hint"]

    # The OpenVINO API on the built IR: each profile runs; outside the bounds, a ShapeError.
    xml = project / "build" / "artifacts" / "ov-dynamic" / "model.xml"
    with OpenVinoRunner(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}) as runner:
        for h, w in ((16, 24), (64, 96), (40, 50)):
            runner.reshape({"image": [1, 3, h, w]})
            out = runner.infer({"image": np.zeros((1, 3, h, w), np.float32)})
            assert out["heat"].shape == (1, 1, h, w)
        for h, w in ((8, 24), (128, 192)):
            with pytest.raises(ShapeError, match=r"16\.\.64, 24\.\.96\]"):
                runner.reshape({"image": [1, 3, h, w]})
