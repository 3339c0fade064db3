"""`activation_type: uint16` (W8A16 for the HTP's `precision: qdq`). ONNX Runtime's
quantizer converts the model to opset 21 for 16-bit Q/DQ; bias correction measures its
shifts in the float model, which keeps its opset (17 here), where its quantized twins'
16-bit Q/DQ must be com.microsoft's (bias_correction._qdq_domain)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from pydantic import ValidationError

from edgebuild.data.loaders import Samples
from edgebuild.quant.params import QuantizeParams
from edgebuild.quant.prepare import prepare, quantize_prepared
from tests.integration.passes import mbconv

pytest.importorskip("onnxruntime")


def quantized(tmp_path: Path, activation_type: str) -> tuple[Path, dict[str, Any]]:
    source = mbconv.build(tmp_path / "m.onnx")
    calibration = Samples({"x": mbconv.inputs(16, seed=1)}, None, ["-"] * 16)
    p = QuantizeParams(mode="static", calibration="c", activation_type=activation_type,
                       bias_correction=True, exclude_nodes=["depthwise"])
    work = tmp_path / activation_type
    prepared = prepare(source, p, calibration, work)
    out = tmp_path / f"{activation_type}.onnx"
    quantize_prepared(prepared, out, p, calibration, prepared.exclude, work)
    return out, prepared.metadata


def test_uint16_activations_with_bias_correction_and_a_float_layer(tmp_path: Path) -> None:
    source = mbconv.build(tmp_path / "m.onnx")
    path, metadata = quantized(tmp_path, "uint16")
    model = onnx.load(str(path))
    inits = {i.name: i for i in model.graph.initializer}
    activation_q = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert activation_q and {n.domain for n in activation_q} == {""}
    assert {inits[n.input[2]].data_type for n in activation_q} == {TensorProto.UINT16}
    assert next(o.version for o in model.opset_import if o.domain == "") == 21
    # the depthwise layer stayed float behind its per-axis guard
    assert any(n.name == "depthwise__float_dq" for n in model.graph.node)
    assert metadata["bias_correction"]["layers"] == 3  # expand, project, head
    unseen = mbconv.inputs(32, seed=2)
    reference = mbconv.run(source, unseen)
    a16 = mbconv.run(path, unseen, "none")
    (tmp_path / "a8").mkdir()
    a8 = mbconv.run(quantized(tmp_path / "a8", "uint8")[0], unseen, "none")
    error = {name: float(np.abs(got - reference).mean()) for name, got in
             (("uint16", a16), ("uint8", a8))}
    assert error["uint16"] < 0.5 * error["uint8"], error


@pytest.mark.parametrize(("changes", "message"), [
    ({"reduce_range": "auto"}, "no reduce_range"),
    ({"reduce_range": True}, "no reduce_range"),
    ({"emit": "corrected-float", "bias_correction": True}, "emit qdq"),
    ({"mode": "dynamic", "calibration": None}, "mode static"),
])
def test_uint16_refuses_what_has_no_16_bit_kernel(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        QuantizeParams.model_validate({"mode": "static", "calibration": "c",
                                       "activation_type": "uint16", **changes})
