"""The OpenVINO backend on real ONNX models (FP32, FP16, QDQ INT8), against ONNX Runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.core.artifact import Artifact
from edgebuild.core.target import Target
from edgebuild.errors import StageError
from edgebuild.execute.worker import context_from_recipe
from edgebuild.registry import load_backend
from tests.conftest import make_tiny_onnx

pytest.importorskip("openvino", reason="the OpenVINO backend needs openvino (extra: openvino)")
pytestmark = pytest.mark.openvino

PROFILE: dict[str, Any] = {
    "name": "intel-cpu", "backend": "openvino",
    "device": {"kind": "cpu", "arch": "x86_64", "os": "linux", "name": "test"},
    "runs_on": {"kind": "host"}, "measure": {"threads": 2},
}


def target(**options: Any) -> Target:
    return Target.model_validate({"name": "intel-cpu",
                                  "profile": {**PROFILE, "description": "", "options": options}})


def artifact(path: Path, fmt: str) -> Artifact:
    return Artifact("test", fmt, path.parent, {path.name: ""}, {path.name: 0},
                    {"main": path.name})


def compile_ir(model: Path, target: Target, out: Path,
               inputs: list[dict[str, Any]] | None = None) -> Any:
    """The backend's compile as the compile stage calls it (the ONNX file as its input)."""
    io = {"inputs": inputs if inputs is not None else [{"name": "x", "shape": [1, 4]}],
          "outputs": []}
    ctx = context_from_recipe("compile@intel-cpu", {"model": artifact(model, "onnx")}, out,
                              io, out)
    return load_backend("openvino").compile(ctx, target)


def compile_and_run(model: Path, tmp_path: Path, feeds: list[dict[str, np.ndarray]],
                    **options: Any) -> tuple[dict[str, Any], list[dict[str, np.ndarray]]]:
    backend = load_backend("openvino")
    out = tmp_path / "ir"
    out.mkdir()
    result = compile_ir(model, target(**options), out)
    assert result.main == "model.xml" and (out / "model.bin").is_file()
    with backend.runner(artifact(out / "model.xml", "openvino-ir"), target(**options),
                        threads=2) as runner:
        outputs = [runner.infer(f) for f in feeds]
    return result.metadata, outputs


def onnxruntime_outputs(model: Path, feeds: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return [session.run(None, f)[0] for f in feeds]


def random_feeds(count: int, shape: tuple[int, ...] = (1, 4),
                 dtype: Any = np.float32) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [{"x": rng.standard_normal(shape).astype(dtype)} for _ in range(count)]


def test_fp32_onnx_matches_onnxruntime(tmp_path: Path) -> None:
    model = make_tiny_onnx(tmp_path / "tiny.onnx")
    feeds = random_feeds(8)
    metadata, outputs = compile_and_run(model, tmp_path, feeds)
    assert [list(o) for o in outputs] == [["y"]] * 8  # the ONNX output name
    for got, want in zip(outputs, onnxruntime_outputs(model, feeds), strict=True):
        np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)
    assert metadata["graph"]["ops"] == {"MatMul": 1, "Relu": 1}
    assert metadata["graph"]["constants_by_type"] == {"f32": 1}  # FP32 stays FP32
    assert metadata["graph"]["quantization"] == "none"
    assert metadata["precision"]["effective_inference_precision"] == "f32"
    assert metadata["openvino"].startswith("20")


def test_compress_to_fp16_is_explicit(tmp_path: Path) -> None:
    model = make_tiny_onnx(tmp_path / "tiny.onnx")
    feeds = random_feeds(4)
    metadata, outputs = compile_and_run(model, tmp_path, feeds, compress_to_fp16=True)
    assert metadata["graph"]["constants_by_type"] == {"f16": 1}
    assert metadata["precision"]["compress_to_fp16"] is True
    # The weights (small integers) are exact in FP16 and OpenVINO decompresses them to
    # compute in f32, so the outputs still match.
    for got, want in zip(outputs, onnxruntime_outputs(model, feeds), strict=True):
        np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)


def test_fp16_onnx(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = (np.arange(12, dtype=np.float16).reshape(4, 3) - 5).astype(np.float16)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "fp16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 3])],
        [numpy_helper.from_array(weights, "W")])
    path = tmp_path / "fp16.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    feeds = random_feeds(4, dtype=np.float16)
    _, outputs = compile_and_run(path, tmp_path, feeds)
    for got, f in zip(outputs, feeds, strict=True):
        assert got["y"].dtype == np.float16
        np.testing.assert_allclose(got["y"], f["x"].astype(np.float32) @ weights, rtol=2e-2,
                                   atol=2e-2)


def test_qdq_int8_onnx_from_quantize_static(tmp_path: Path) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    fp32 = make_tiny_onnx(tmp_path / "tiny.onnx")
    calibration = random_feeds(32)

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.items = iter(calibration)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    qdq = tmp_path / "qdq.onnx"
    quantize_static(str(fp32), str(qdq), Reader(), quant_format=QuantFormat.QDQ)
    feeds = random_feeds(8)
    metadata, outputs = compile_and_run(qdq, tmp_path, feeds)
    assert metadata["graph"]["quantization"] == "onnx-qdq"
    assert metadata["graph"]["ops"].get("FakeQuantize", 0) >= 1
    # It really runs in int8: the MatMul's layer (FullyConnected) reads 8-bit integers.
    # Which of u8 / i8 a layer reports is the plugin's choice (on an AVX2 EPYC: the FC u8,
    # u8 activations times i8 weights, and an i8 weight Transpose), so either counts.
    assert {"u8", "i8"} & set(metadata["precision"]["runtime_precisions"])
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(tmp_path / "ir" / "model.xml")), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    layers = [op.get_rt_info() for op in compiled.get_runtime_model().get_ordered_ops()]
    matmuls = [str(i["runtimePrecision"].astype(str)) for i in layers
               if str(i["layerType"].astype(str)) in ("FullyConnected", "MatMul")]
    assert matmuls and set(matmuls) <= {"u8", "i8"}, matmuls
    # INT8 vs ONNX Runtime's own execution of the same QDQ model: same quantization grid.
    for got, want in zip(outputs, onnxruntime_outputs(qdq, feeds), strict=True):
        assert list(got) == ["y"]
        np.testing.assert_allclose(got["y"], want, atol=0.15 * float(np.abs(want).max() + 1))


def dynamic_tiny(path: Path) -> Path:
    import onnx

    make_tiny_onnx(path)
    model = onnx.load(str(path))
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(model, str(path))
    return path


def test_static_dynamic_and_explicit_shapes(tmp_path: Path) -> None:
    model = dynamic_tiny(tmp_path / "dyn.onnx")
    cases = [({}, {"x": "[1,4]"}), ({"shapes": "dynamic"}, {"x": "[?,4]"}),
             ({"input_shapes": {"x": [3, 4]}}, {"x": "[3,4]"})]
    for i, (options, shapes) in enumerate(cases):
        out = tmp_path / f"ir{i}"
        out.mkdir()
        metadata = compile_ir(model, target(**options), out).metadata
        assert metadata["shapes"] == shapes
    with pytest.raises(StageError, match="not model inputs") as err:
        compile_ir(model, target(input_shapes={"image": [1, 4]}), tmp_path)
    assert "model inputs: x" in str(err.value)


def test_a_static_ir_takes_the_declared_shape_not_1(tmp_path: Path) -> None:
    """The bug seen on a text detector with dynamic H/W: `shapes: static` made every
    dynamic dimension 1, so compile passed and no real input fitted the IR."""
    model = dynamic_tiny(tmp_path / "dyn.onnx")
    metadata = compile_ir(model, target(), tmp_path, [{"name": "x", "shape": [8, 4]}]).metadata
    assert metadata["shapes"] == {"x": "[8,4]"}
    with pytest.raises(StageError, match="the recipe declares") as err:
        compile_ir(model, target(), tmp_path, [{"name": "x", "shape": [8, 5]}])
    assert "match the model" in err.value.hint


def test_dynamic_ir_gives_each_sample_its_own_output(tmp_path: Path) -> None:
    """Pins the workaround for OpenVINO's dynamic-shape stale-output issue (see the runner)."""
    model = dynamic_tiny(tmp_path / "dyn.onnx")
    backend = load_backend("openvino")
    out = tmp_path / "ir"
    out.mkdir()
    compile_ir(model, target(shapes="dynamic"), out)
    rng = np.random.default_rng(1)
    batch = rng.standard_normal((10, 4)).astype(np.float32)
    want = onnxruntime_outputs(model, [{"x": batch[i:i + 1]} for i in range(10)])
    for _ in range(3):  # a fresh runner each time, as the infer and latency stages do
        with backend.runner(artifact(out / "model.xml", "openvino-ir"),
                            target(shapes="dynamic"), threads=2) as runner:
            got = [runner.infer({"x": batch[i:i + 1]})["y"] for i in range(10)]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_gpu_and_npu_targets_are_not_measurable_here() -> None:
    import openvino as ov

    backend = load_backend("openvino")
    assert backend.unmeasurable_reason(target(device="CPU")) == ""
    for device in ("GPU", "NPU"):
        if any(d.startswith(device) for d in ov.Core().available_devices):
            continue
        reason = backend.unmeasurable_reason(target(device=device))
        assert reason.startswith(f"not measurable here: needs an Intel {device}")


def test_options_are_validated() -> None:
    from pydantic import ValidationError

    backend = load_backend("openvino")
    with pytest.raises(ValidationError, match="f32"):
        backend.options(target(inference_precision="fp32"))
    with pytest.raises(ValidationError, match="needs `shapes: static`"):
        backend.options(target(shapes="dynamic", input_shapes={"x": [1, 4]}))
