"""Full-integer INT8 TFLite keeps the INT8 rules' float nodes float (issue 31).

tests/models/yolo_head.py concatenates box pixels (0-320) and sigmoid class scores
(0-1) into `[1, 7, 1600]`; exported by the real export-onnx pass, converted by the
real onnx-to-tf stage, compiled by the TFLite backend at `precision: int8` and
calibrated on scikit-image's photos.

On main (6a74d5b) the converter gave the output CONCATENATION one int8 scale (1.239):
every score came out 0 or 1.239 (max abs error 0.52 on the 26 photos). With the
float nodes denylisted the scores keep max abs error ~0.004 (AMD EPYC Zen 4, AVX-512
VNNI). Margins are wide, so the CPU's kernels do not decide these tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.backends.tflite.backend import TfliteBackend
from edgebuild.core.artifact import Artifact
from edgebuild.core.profile import Device, TargetProfile
from edgebuild.core.target import Target
from tests.integration.passes.conftest import as_artifact, context
from tests.integration.passes.test_int8_safe import RECIPE

pytestmark = [pytest.mark.tflite, pytest.mark.slow]


@pytest.fixture(scope="module")
def savedmodel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Artifact, Artifact]:
    """(the exported ONNX, the onnx-to-tf SavedModel) of the YOLO-style head."""
    pytest.importorskip("torch", reason="export needs torch")
    pytest.importorskip("skimage", reason="the calibration photos ship with scikit-image")
    from edgebuild.backends.tflite.onnx_to_tf import OnnxToTf, OnnxToTfParams
    from edgebuild.passes.export_onnx import ExportOnnx, ExportParams

    root = tmp_path_factory.mktemp("yolo-tflite")
    ExportOnnx().run(context(root / "export", recipe=RECIPE), ExportParams(opset=17))
    exported = as_artifact(root / "export", "onnx", "model.onnx")
    result = OnnxToTf().run(context(root / "tf", {"model": exported}, RECIPE),
                            OnnxToTfParams())
    converted = Artifact("0" * 64, "tf-savedmodel", root / "tf", {}, {},
                         {**result.metadata, "main": result.main})
    return exported, converted


def target(**options: Any) -> Target:
    profile = TargetProfile(
        name="android", description="", backend="tflite",
        device=Device(kind="cpu", arch="aarch64", os="android", name="phone"),
        options={"precision": "int8", "calibration_dataset": "photos",
                 "latency_on": "host", **options})
    return Target(name="android-int8", profile=profile)


def compile_int8(tmp_path: Path, model: Artifact, **options: Any
                 ) -> tuple[Artifact, Target]:
    built = target(**options)
    out = tmp_path / "compile"
    result = TfliteBackend().compile(context(out, {"model": model}, RECIPE), built)
    return Artifact("1" * 64, "tflite", out, {}, {}, {**result.metadata,
                                                      "main": result.main}), built


def outputs(tmp_path: Path, compiled: Artifact, built: Target,
            reference: Artifact) -> tuple[np.ndarray, np.ndarray]:
    import onnxruntime as ort

    samples = context(tmp_path / "eval", recipe=RECIPE).dataset("photos")
    session = ort.InferenceSession(str(reference.main), providers=["CPUExecutionProvider"])
    runner = TfliteBackend().runner(compiled, built, threads=2)
    fp32, int8 = [], []
    with runner:
        for i in range(len(samples)):
            feed = samples.feed(i)
            fp32.append(session.run(None, feed)[0])
            int8.append(runner.infer(feed)["raw"])
    return np.concatenate(fp32), np.concatenate(int8)


def output_concat(model: Artifact) -> str:
    import onnx

    graph = onnx.load(str(model.main)).graph
    return next(n.name for n in graph.node if n.output[0] == graph.output[0].name)


def test_full_integer_int8_keeps_the_class_scores(tmp_path: Path,
                                                  savedmodel: tuple[Artifact, Artifact]
                                                  ) -> None:
    exported, converted = savedmodel
    compiled, built = compile_int8(tmp_path, converted)
    fp32, int8 = outputs(tmp_path, compiled, built, exported)
    scores, got = fp32[:, 4:], int8[:, 4:]
    assert np.ptp(scores) > 0.2, "the model's scores spread (not a constant 0.5)"
    assert np.abs(scores - got).max() < 0.05
    assert np.unique(np.round(got, 3)).size > 10, "scores are not 0/1-only"
    assert np.abs(fp32[:, :4] - int8[:, :4]).max() < 4.0  # pixels: boxes where they were
    kept = compiled.metadata["kept_float"]
    concat = output_concat(exported)
    assert concat in kept["nodes"] and concat in kept["honoured"]
    assert [m["node"] for m in kept["mixed_range"] if m["op_type"] == "Concat"] == [concat]
    assert kept["denylisted_nodes"] and kept["api"]
    assert not kept["not_honoured"], kept["not_honoured"]
    ops = {row["op"]: row for row in compiled.metadata["nnapi"]["ops"]}
    assert "CONV_2D" in ops and "DEQUANTIZE" in ops, "convs int8, tail float"


def test_mixed_range_rule_alone_keeps_the_scores(
        tmp_path: Path, savedmodel: tuple[Artifact, Artifact]) -> None:
    """keep_float: none: only the Concat and the same-scale ops feeding it stay float
    (TFLite would give the scores' Reshape the Concat's scale otherwise)."""
    exported, converted = savedmodel
    compiled, built = compile_int8(tmp_path, converted, keep_float="none")
    kept = compiled.metadata["kept_float"]
    assert kept["output_tail"] == [] and output_concat(exported) in kept["honoured"]
    assert kept["same_scale"], "the Reshapes feeding the Concat"
    fp32, int8 = outputs(tmp_path, compiled, built, exported)
    assert np.abs(fp32[:, 4:] - int8[:, 4:]).max() < 0.05


def test_keep_float_none_and_no_bound_is_mains_behaviour(
        tmp_path: Path, savedmodel: tuple[Artifact, Artifact]) -> None:
    """Both rules off: one int8 scale for the output Concat, the scores collapse."""
    exported, converted = savedmodel
    compiled, built = compile_int8(tmp_path, converted, keep_float="none",
                                   mixed_range_bound=None)
    assert compiled.metadata["kept_float"]["nodes"] == []
    fp32, int8 = outputs(tmp_path, compiled, built, exported)
    got = int8[:, 4:]
    assert np.unique(got).size <= 3, "main's failure: scores take one or two values"
    assert np.abs(fp32[:, 4:] - got).max() > 0.3


def test_integer_io_says_the_output_is_not_honoured(
        tmp_path: Path, savedmodel: tuple[Artifact, Artifact]) -> None:
    """io_type int8 quantizes the float Concat's output again at the model's edge: the
    stage says so instead of claiming it honoured the list."""
    exported, converted = savedmodel
    compiled, _ = compile_int8(tmp_path, converted, io_type="int8")
    kept = compiled.metadata["kept_float"]
    concat = output_concat(exported)
    assert concat in kept["not_honoured"] and "io_type" in kept["not_honoured"][concat]
    assert concat not in kept["honoured"]
