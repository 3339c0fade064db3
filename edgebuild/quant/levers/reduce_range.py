"""`reduce_range: auto`: 7-bit weights only for the layers whose u8s8 pair sums overflow.

x86 CPUs without VNNI multiply uint8 activations by int8 weights with `vpmaddubsw`,
which sums each pair of products into an int16 and saturates. The model is quantized
once as written (a probe), the pair sums of every quantized Conv/Gemm are counted on
a few calibration samples (qdq_graph.u8s8_saturation), and the layers that overflow
on more than `saturation_tolerance` of them get 7-bit weights through ONNX Runtime's
TensorQuantOverrides. Measured once per prepared model (`Prepared.reduced`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.quant.engine import quantize
from edgebuild.quant.samples import first, tensor_values

if TYPE_CHECKING:
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.params import QuantizeParams
    from edgebuild.quant.prepared import Prepared

SATURATION_SAMPLES = 8


def saturation_overrides(prepared: Prepared, p: QuantizeParams, calibration: Samples | None,
                         scratch: Path) -> dict[str, Any]:
    """reduce_range auto: 7-bit weights (TensorQuantOverrides) where u8s8 pairs overflow."""
    if p.reduce_range != "auto" or calibration is None:
        return {}
    if prepared.reduced is None:
        import onnx

        from edgebuild.quant.qdq_graph import u8s8_saturation

        probe = scratch / "saturation-probe.onnx"
        quantize(prepared.path, probe, p, calibration, list(prepared.exclude), scratch)
        model = onnx.load(str(probe))
        wanted = [n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear"]
        values = tensor_values(prepared.path, wanted, first(calibration, SATURATION_SAMPLES))
        rates = u8s8_saturation(model, values)
        source = onnx.load(str(prepared.path), load_external_data=False).graph
        nodes = {n.name: n for n in source.node if len(n.input) > 1}
        over = sorted(node for node, rate in rates.items() if rate > p.saturation_tolerance)
        prepared.reduced = {nodes[node].input[1]: [{"axis": _weight_axis(nodes[node]),
                                                    "reduce_range": True}]
                            for node in over if node in nodes}
        prepared.metadata["reduce_range_auto"] = {
            "tolerance": p.saturation_tolerance, "reduced": over,
            "overflow_rate": {node: float(f"{rate:.3g}") for node, rate in rates.items()}}
    return prepared.reduced


def _weight_axis(node: Any) -> int:
    """The output-channel axis of a Conv or Gemm weight (per-channel scales run along it)."""
    if node.op_type == "Gemm":
        return 0 if any(a.name == "transB" and a.i for a in node.attribute) else 1
    return 0
