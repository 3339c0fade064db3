"""Full-integer TFLite from the quantize pass's `emit: corrected-float` (issue 31).

The Fashion-MNIST CNN (exported and optimized by the real passes) goes through the real
quantize pass with `emit: corrected-float` (TFLite's scheme: int8 asymmetric activations,
symmetric per-channel int8 weights), then the real onnx-to-tf stage and the TFLite
backend's int8 compile; the same model without the pass is built beside it. The int32
biases in the two .tflite files, dequantized, are the corrected and the original ONNX
biases (each within one of its bias steps): the correction is what gets converted.
Tolerances are the int32 bias steps, so the CPU's kernels do not decide these tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.core.artifact import Artifact
from edgebuild.core.profile import Device, TargetProfile
from edgebuild.core.target import Target
from tests.integration.passes.conftest import as_artifact, context, fashion_onnx

pytestmark = [pytest.mark.tflite, pytest.mark.slow]
__all__ = ["fashion_onnx"]  # the session fixture, shared with the pass tests

CALIBRATION = 32


def build_int8(root: Path, model: Artifact) -> Path:
    """onnx-to-tf, then the TFLite backend's full-integer compile: the .tflite."""
    from edgebuild.backends.tflite.backend import TfliteBackend
    from edgebuild.backends.tflite.onnx_to_tf import OnnxToTf, OnnxToTfParams

    result = OnnxToTf().run(context(root / "tf", {"model": model}), OnnxToTfParams())
    saved = Artifact("0" * 64, "tf-savedmodel", root / "tf", {}, {},
                     {**result.metadata, "main": result.main})
    profile = TargetProfile(
        name="android", description="", backend="tflite",
        device=Device(kind="cpu", arch="aarch64", os="android", name="phone"),
        options={"precision": "int8", "io_type": "int8", "calibration_dataset": "calib",
                 "calibration_samples": CALIBRATION, "latency_on": "host"})
    compiled = TfliteBackend().compile(context(root / "tflite", {"model": saved}),
                                       Target(name="android-int8", profile=profile))
    return root / "tflite" / compiled.main


def onnx_biases(path: Path) -> dict[str, np.ndarray]:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return {n.name: inits[n.input[2]].astype(np.float64) for n in model.graph.node
            if n.op_type in ("Conv", "Gemm") and len(n.input) > 2 and n.input[2] in inits}


def tflite_biases(path: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every int32 per-channel bias of the .tflite: (dequantized value, its step)."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    found = []
    for detail in interpreter.get_tensor_details():
        scales = detail["quantization_parameters"]["scales"]
        if detail["dtype"] == np.int32 and len(detail["shape"]) == 1 and scales.size:
            value = interpreter.get_tensor(detail["index"]).astype(np.float64)
            found.append((value * scales, np.broadcast_to(scales, value.shape)))
    return found


def nearest(bias: np.ndarray, candidates: list[tuple[np.ndarray, np.ndarray]]
            ) -> tuple[float, float]:
    """(largest error in steps, largest step) of the .tflite bias closest to `bias`."""
    same = [(v, s) for v, s in candidates if v.shape == bias.shape]
    assert same, f"no .tflite bias of {bias.shape[0]} channels"
    value, step = min(same, key=lambda c: float(np.max(np.abs(c[0] - bias))))
    return float(np.max(np.abs(value - bias) / step)), float(np.max(step))


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory, fashion_onnx: Artifact
           ) -> dict[str, Any]:
    from edgebuild.passes.quantize import Quantize
    from edgebuild.quant.params import QuantizeParams

    root = tmp_path_factory.mktemp("tflite-bias")
    p = QuantizeParams.model_validate({
        "mode": "static", "calibration": "calib", "calibration_samples": CALIBRATION,
        "activation_type": "int8", "bias_correction": True, "emit": "corrected-float"})
    result = Quantize().run(context(root / "corrected", {"model": fashion_onnx}), p)
    corrected = as_artifact(root / "corrected", "onnx", result.main)
    return {"metadata": result.metadata, "source": fashion_onnx.main,
            "corrected": corrected.main,
            "tflite_source": build_int8(root / "plain", fashion_onnx),
            "tflite_corrected": build_int8(root / "bc", corrected)}


def test_corrected_float_is_the_float_graph_with_new_biases(builds: dict[str, Any]) -> None:
    import onnx

    source, corrected = onnx.load(str(builds["source"])), onnx.load(str(builds["corrected"]))
    ops = [n.op_type for n in corrected.graph.node]
    assert "QuantizeLinear" not in ops and "DequantizeLinear" not in ops
    assert ops == [n.op_type for n in source.graph.node], "the same float graph"
    before, after = onnx_biases(builds["source"]), onnx_biases(builds["corrected"])
    assert set(before) == set(after) and len(after) >= 4  # 4 convs and the Gemm
    moved = [name for name in after if not np.array_equal(after[name], before[name])]
    assert len(moved) == len(after), "every quantized layer's bias is corrected"
    assert builds["metadata"]["emit"] == "corrected-float"
    assert builds["metadata"]["bias_correction"]["layers"] == len(after)
    assert "float_layers_guarded" not in builds["metadata"]


def test_the_tflite_carries_the_corrected_biases(builds: dict[str, Any]) -> None:
    before, after = onnx_biases(builds["source"]), onnx_biases(builds["corrected"])
    plain, corrected = tflite_biases(builds["tflite_source"]), \
        tflite_biases(builds["tflite_corrected"])
    assert len(plain) == len(corrected) == len(after)
    shifted_by_steps = []
    for name in after:
        # Each build's int32 bias is its own ONNX bias, rounded to its step (scale_in x
        # scale_w; the two calibrations' input scales differ slightly).
        error, step = nearest(after[name], corrected)
        assert error <= 1.01, f"{name}: corrected bias off by {error:.2f} steps"
        error, _ = nearest(before[name], plain)
        assert error <= 1.01, f"{name}: original bias off by {error:.2f} steps"
        shifted_by_steps.append(float(np.max(np.abs(after[name] - before[name]))) / step)
    # Not vacuous: the correction is many bias steps, so the original biases are not
    # what the corrected .tflite holds.
    assert max(shifted_by_steps) > 10, shifted_by_steps
    kept = [name for name in after if nearest(before[name], corrected)[0] <= 2]
    assert not kept, f"the corrected .tflite holds the original biases of {kept}"
