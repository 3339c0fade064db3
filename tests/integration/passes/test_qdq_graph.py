"""What ONNX Runtime does to a QDQ model: re-quantized float layers, u8s8 saturation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgebuild.data.loaders import Samples
from edgebuild.quant import engine
from edgebuild.quant.engine import guarded_layers
from edgebuild.quant.params import QuantizeParams
from edgebuild.quant.prepare import prepare, quantize_prepared
from edgebuild.quant.qdq_graph import u8s8_saturation
from tests.integration.passes import mbconv

pytest.importorskip("onnxruntime")


def has_vnni() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


def test_float_layers_stay_float(tmp_path: Path) -> None:
    """A layer kept in float, fed by a DequantizeLinear: ONNX Runtime would quantize its
    weights per-tensor (WeightBiasQuantization) unless its input DQ is per-axis."""
    source = mbconv.build(tmp_path / "m.onnx")
    calibration = Samples({"x": mbconv.inputs(16)}, None, ["-"] * 16)
    # 7-bit weights: no u8s8 saturation, so the integer kernels compute what the graph says.
    p = QuantizeParams(mode="static", calibration="c", exclude_nodes=["depthwise"],
                       reduce_range=True)
    unguarded, guarded = tmp_path / "unguarded.onnx", tmp_path / "guarded.onnx"
    engine.quantize(source, guarded, p, calibration, ["depthwise"], tmp_path)
    assert guarded_layers(guarded) == ["depthwise"]
    model = onnx.load(str(guarded))
    for node in list(model.graph.node):  # undo the guard to show what it prevents
        if node.name.endswith("__float_dq"):
            consumer = next(n for n in model.graph.node if node.output[0] in n.input)
            original = next(n for n in model.graph.node if n.op_type == "DequantizeLinear"
                            and n.input[0] == node.input[0] and n is not node)
            consumer.input[0] = original.output[0]
            model.graph.node.remove(node)
    onnx.save(model, str(unguarded))
    x = mbconv.inputs(4, seed=3)
    as_written = mbconv.run(guarded, x, "none")
    np.testing.assert_allclose(mbconv.run(unguarded, x, "none"), as_written, rtol=1e-5)
    # Integer requantization rounds a little; per-tensor depthwise weights cost far more.
    guarded_error = float(np.mean(np.abs(mbconv.run(guarded, x, "all") - as_written)))
    unguarded_error = float(np.mean(np.abs(mbconv.run(unguarded, x, "all") - as_written)))
    assert guarded_error < 0.02 * float(np.max(np.abs(as_written)))
    assert unguarded_error > 3 * guarded_error, (guarded_error, unguarded_error)


def pair_model(path: Path, weights: np.ndarray) -> Path:
    """uint8 input (scale 1, zero point 0) -> Conv with int8 weights (scale 1): a QLinearConv."""
    out_c, in_c = weights.shape[:2]
    inits = [numpy_helper.from_array(np.array(1.0, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.uint8), "z"),
             numpy_helper.from_array(weights.astype(np.int8), "wq"),
             numpy_helper.from_array(np.ones(out_c, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(out_c, np.int8), "wz"),
             numpy_helper.from_array(np.array(1000.0, np.float32), "ys"),
             numpy_helper.from_array(np.array(0, np.uint8), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd"], ["c"], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"])]
    graph = helper.make_graph(nodes, "pair",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [1, in_c, 2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                ir_version=8), str(path))
    return path


@pytest.mark.parametrize(("pair", "overflows"), [((0, 1), True), ((2, 3), True),
                                                 ((1, 2), False), ((0, 2), False)])
def test_saturation_model_matches_the_pairs_it_predicts(tmp_path: Path, pair: tuple[int, int],
                                                       overflows: bool) -> None:
    weights = np.zeros((4, 8, 1, 1))
    weights[:, list(pair)] = 127
    path = pair_model(tmp_path / "pair.onnx", weights)
    x = np.full((1, 8, 2, 2), 255.0, np.float32)
    rate = u8s8_saturation(onnx.load(str(path)), {"x": x})["conv"]
    assert (rate > 0) == overflows
    # The prediction is of the kernels of a CPU without VNNI (vpmaddubsw: a pair sum
    # saturates at int16). VNNI (AVX-512 VNNI, AVX-VNNI; every AMX CPU has it) multiplies
    # and adds in int32 (vpdpbusd): nothing saturates, whatever the prediction.
    saturates = overflows and not has_vnni()
    # 2 × 255 × 127 = 64770 is exactly representable in float; saturated it is 32767 + 0.
    got = float(np.asarray(mbconv.run(path, x))[0, 0, 0, 0])
    assert got == pytest.approx(32767 if saturates else 64770, abs=1000)


def test_reduce_range_auto_reduces_only_saturating_layers(tmp_path: Path) -> None:
    source = mbconv.build(tmp_path / "m.onnx")
    calibration = Samples({"x": mbconv.inputs(16)}, None, ["-"] * 16)
    p = QuantizeParams(mode="static", calibration="c", reduce_range="auto",
                       saturation_tolerance=0.0)
    prepared = prepare(source, p, calibration, tmp_path / "work")
    quantize_prepared(prepared, tmp_path / "q.onnx", p, calibration, [], tmp_path / "work")
    auto = prepared.metadata["reduce_range_auto"]
    assert set(auto["overflow_rate"]) == {"expand", "project", "head"}  # not the depthwise
    assert set(auto["reduced"]) == {n for n, r in auto["overflow_rate"].items() if r > 0}
    model = onnx.load(str(tmp_path / "q.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    weight = {"expand": "expand_w", "project": "project_w", "head": "head_w"}
    for layer, name in weight.items():
        largest = int(np.abs(inits[f"{name}_quantized"].astype(np.int32)).max())
        assert largest == (64 if layer in auto["reduced"] else 127), (layer, largest)
