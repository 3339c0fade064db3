"""The TensorRT backend's host half on real ONNX models: the FP16 mixed-precision ONNX, the
Q/DQ checks, the coverage verdict at compile time, Polygraphy's sanitize, the trtexec line.

All of it runs in ONNX Runtime here; the engine itself is test_engine.py's (device only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgebuild.backends.tensorrt.checks import check_qdq
from edgebuild.backends.tensorrt.options import (
    ShapeProfile,
    TensorRtOptions,
    input_profiles,
    trtexec_command,
)
from edgebuild.core.artifact import Artifact
from edgebuild.core.target import Target
from edgebuild.data.loaders import Samples
from edgebuild.errors import StageError
from edgebuild.execute.worker import context_from_recipe
from edgebuild.quant.params import QuantizeParams
from edgebuild.registry import load_backend
from tests.conftest import make_tiny_onnx

PROFILE: dict[str, Any] = {
    "name": "jetson-orin-nano", "backend": "tensorrt", "description": "",
    "device": {"kind": "gpu", "arch": "aarch64", "os": "linux", "name": "test"},
    "runs_on": {"kind": "dask", "resource": "jetson-orin"},
}
F = TensorProto.FLOAT


def target(**options: Any) -> Target:
    return Target.model_validate({"name": "jetson-orin-nano",
                                  "profile": {**PROFILE, "options": options}})


def artifact(path: Path, fmt: str = "onnx") -> Artifact:
    return Artifact("test", fmt, path.parent, {path.name: ""}, {path.name: 0},
                    {"main": path.name})


def compile_for_trt(model: Path, out: Path, samples: Samples | None = None,
                    shape: list[int] | None = None, **options: Any) -> Any:
    """The backend's compile as the compile stage calls it."""
    out.mkdir(parents=True, exist_ok=True)
    name = model.stem
    io = {"inputs": [{"name": "x", "shape": shape or [1, 4]}], "outputs": []}
    ctx = context_from_recipe(f"compile@{name}", {"model": artifact(model)}, out, io, out)
    if samples is not None:
        ctx.datasets["calibration"] = lambda: samples
    return load_backend("tensorrt").compile(ctx, target(**options))


def save(nodes: list[Any], inits: list[Any], path: Path, shape: list[int | str] | None = None,
         out_shape: list[int | str] | None = None) -> Path:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, shape or [1, 4])],
                              [helper.make_tensor_value_info("y", F, out_shape or [1, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def samples(count: int = 8) -> Samples:
    x = np.random.default_rng(0).standard_normal((count, 4)).astype(np.float32)
    return Samples({"x": x}, None, [str(i) for i in range(count)])


def run(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])


def test_fp16_keeps_io_fp32_and_overflowing_nodes_fp32(tmp_path: Path) -> None:
    """A node whose output passes data_max on the data stays FP32, named with the value;
    the rest runs FP16, and ONNX Runtime runs the result close to FP32."""
    weights = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.0) / 10
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="small"),
             helper.make_node("Mul", ["h", "k"], ["big"], name="huge"),  # ~1e3: overflow risk
             helper.make_node("Mul", ["big", "inv"], ["y"], name="back")]
    model = save(nodes, [numpy_helper.from_array(weights, "W"),
                         numpy_helper.from_array(np.array(2000.0, np.float32), "k"),
                         numpy_helper.from_array(np.array(1 / 2000, np.float32), "inv")],
                 tmp_path / "m.onnx")
    result = compile_for_trt(model, tmp_path / "out", samples(), calibration_dataset="calibration")
    fp16 = result.metadata["fp16"]
    assert list(fp16["fp32_nodes"]) == ["huge"]
    assert "> data_max 512" in fp16["fp32_nodes"]["huge"]
    assert fp16["fp16_nodes"] >= 1 and fp16["range_samples"] == 8
    built = onnx.load(str(tmp_path / "out" / "model.onnx"))
    assert built.graph.input[0].type.tensor_type.elem_type == F  # I/O stay FP32
    assert built.graph.output[0].type.tensor_type.elem_type == F
    assert any(n.op_type == "Cast" for n in built.graph.node)
    halves = [i for i in built.graph.initializer if i.data_type == TensorProto.FLOAT16]
    assert {i.name for i in halves} >= {"W"}  # the FP16 layer's weight is FP16
    x = samples().inputs["x"][:1]
    np.testing.assert_allclose(run(tmp_path / "out" / "model.onnx", x), run(model, x),
                               rtol=1e-2, atol=1e-2)
    without = compile_for_trt(model, tmp_path / "no-data")  # only op and weight rules
    assert without.metadata["fp16"]["fp32_nodes"] == {}


def test_fp16_keeps_sensitive_ops_and_named_nodes(tmp_path: Path) -> None:
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("Exp", ["h"], ["e"], name="exp"),
             helper.make_node("Relu", ["e"], ["y"], name="relu")]
    model = save(nodes, [numpy_helper.from_array(np.full((4, 3), 0.1, np.float32), "W")],
                 tmp_path / "m.onnx")
    kept = compile_for_trt(model, tmp_path / "a", fp16_keep_nodes=["relu"]).metadata["fp16"]
    assert set(kept["fp32_nodes"]) == {"exp", "relu"}
    assert "Exp is kept FP32" in kept["fp32_nodes"]["exp"]


def test_int8_needs_symmetric_int8_qdq(tmp_path: Path) -> None:
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    from edgebuild.quant.engines.ort import CalibrationReader

    source = make_tiny_onnx(tmp_path / "tiny.onnx")
    with pytest.raises(StageError, match="has none") as none:
        compile_for_trt(source, tmp_path / "float", precision="int8")
    assert "preset: tensorrt" in none.value.hint
    asymmetric = tmp_path / "u8.onnx"
    quantize_static(source, asymmetric, CalibrationReader(samples()), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    with pytest.raises(StageError, match=r"symmetric int8 Q/DQ only.*is uint8"):
        compile_for_trt(asymmetric, tmp_path / "u8", precision="int8")
    symmetric = tmp_path / "s8.onnx"
    quantize_static(source, symmetric, CalibrationReader(samples()), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
    facts = check_qdq(onnx.load(str(symmetric)))
    assert facts["quantize_nodes"] >= 1
    result = compile_for_trt(symmetric, tmp_path / "s8", precision="int8")
    assert result.metadata["qdq"] == facts


def test_quantize_preset_tensorrt_sets_and_guards_its_params() -> None:
    params = QuantizeParams.model_validate({"preset": "tensorrt", "calibration": "c"})
    assert (params.mode, params.activation_type, params.activation_symmetric,
            params.per_channel) == ("static", "int8", True, True)
    assert params.op_types == ["Conv", "ConvTranspose", "Gemm", "MatMul"]
    with pytest.raises(ValueError, match="preset tensorrt sets activation_type: uint8"):
        QuantizeParams.model_validate({"preset": "tensorrt", "calibration": "c",
                                       "activation_type": "uint8"})


def test_an_op_the_parser_lacks_fails_compile_unless_reported(tmp_path: Path) -> None:
    """Found at compile time, here, not on the device: a node TensorRT's ONNX parser has
    no importer for is named, with the way forward."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("Unique", ["h"], ["u"], name="dedupe"),
             helper.make_node("ReduceSum", ["u"], ["y"], name="sum", keepdims=0)]
    model = save(nodes, [numpy_helper.from_array(np.ones((4, 3), np.float32), "W")],
                 tmp_path / "m.onnx", out_shape=[])
    with pytest.raises(StageError, match=r"does not support Unique \(dedupe\)") as refused:
        compile_for_trt(model, tmp_path / "fail", precision="fp32")
    assert "unsupported: report" in refused.value.hint
    reported = compile_for_trt(model, tmp_path / "report", precision="fp32",
                               unsupported="report")
    assert "1 needs a plugin: Unique" in reported.metadata["coverage"]
    table = (tmp_path / "report" / "tensorrt.md").read_text()
    assert "| Unique |" in table and "needs a plugin" in table


def test_sanitize_folds_constants_with_polygraphy(tmp_path: Path) -> None:
    pytest.importorskip("polygraphy", reason="sanitize needs polygraphy (extra: tensorrt-onnx)")
    nodes = [helper.make_node("Add", ["a", "b"], ["c"], name="const_add"),  # foldable
             helper.make_node("MatMul", ["x", "c"], ["y"], name="mm")]
    inits = [numpy_helper.from_array(np.ones((4, 3), np.float32), "a"),
             numpy_helper.from_array(np.ones((4, 3), np.float32), "b")]
    model = save(nodes, inits, tmp_path / "m.onnx")
    plain = compile_for_trt(model, tmp_path / "plain", precision="fp32")
    folded = compile_for_trt(model, tmp_path / "folded", precision="fp32", sanitize=True)
    assert folded.metadata["sanitized"] is True
    ops = [n.op_type for n in onnx.load(str(tmp_path / "folded" / "model.onnx")).graph.node]
    assert ops == ["MatMul"]
    assert plain.metadata["coverage"].startswith("2 of 2")
    x = samples().inputs["x"][:1]
    np.testing.assert_allclose(run(tmp_path / "folded" / "model.onnx", x), run(model, x))


def test_dynamic_inputs_get_a_profile_and_the_trtexec_line_says_so(tmp_path: Path) -> None:
    model = save([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
                 [numpy_helper.from_array(np.ones((4, 3), np.float32), "W")],
                 tmp_path / "m.onnx", shape=["batch", 4], out_shape=["batch", 3])
    declared = compile_for_trt(model, tmp_path / "a", precision="fp32", shape=[2, 4])
    assert declared.metadata["profiles"] == {"x": {"min": [2, 4], "opt": [2, 4],
                                                   "max": [2, 4]}}
    assert "--minShapes=x:2x4 --optShapes=x:2x4 --maxShapes=x:2x4" in \
        declared.metadata["trtexec"]
    compile_for_trt(model, tmp_path / "b", precision="fp32",
                    profiles={"x": {"min": [1, 4], "opt": [8, 4], "max": [32, 4]}})
    line = (tmp_path / "b" / "trtexec.sh").read_text()
    assert "--minShapes=x:1x4 --optShapes=x:8x4 --maxShapes=x:32x4" in line
    assert "--stronglyTyped" in line


def test_trtexec_command_for_weak_typing_and_dla() -> None:
    weak = TensorRtOptions(precision="int8", typing="weak", dla_core=0)  # type: ignore[arg-type]
    command = trtexec_command(weak, "model.onnx", {})
    assert "--int8" in command and "--fp16" in command and "--stronglyTyped" not in command
    assert command[-2:] == ["--useDLACore=0", "--allowGPUFallback"]
    with pytest.raises(ValueError, match="typing weak needs TensorRT 10 or older"):
        TensorRtOptions(typing="weak", tensorrt_version="11.1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min <= opt <= max"):
        ShapeProfile(min=[4], opt=[2], max=[8])
    assert input_profiles(TensorRtOptions(), [{"name": "x", "shape": [1, 4]}], []) == {}
