"""Who computes the encodings, chosen by the params: the one call every lever and search
quantizes through.

    quantize(source, destination, p, calibration, exclude, scratch, only, overrides)
        mode fp16        ─▶ engines/fp16.convert
        engine aimet     ─▶ engines/aimet.quantize      ─┐
        mode dynamic     ─▶ engines/ort.quantize_dynamic  │
        mode static      ─▶ engines/ort.quantize_static  ─┴▶ float layers kept float
                                                            (qdq_graph; not for TensorRT)

`exclude` stay float, `only` (sensitivity runs) restricts quantization to those nodes,
`overrides` are reduce_range auto's TensorQuantOverrides. Imported only inside the worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.quant.engines import aimet, fp16, ort

if TYPE_CHECKING:
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.params import QuantizeParams


def quantize(source: Path, destination: Path, p: QuantizeParams, calibration: Samples | None,
             exclude: list[str], scratch: Path, only: list[str] | None = None,
             overrides: dict[str, Any] | None = None) -> None:
    """Quantize `source` into `destination` with the engine `p` names."""
    if p.mode == "fp16":
        fp16.convert(source, destination, p.keep_io_fp32)
        return
    if p.engine == "aimet":
        assert calibration is not None
        aimet.quantize(source, destination, p, calibration, exclude, only)
        _keep_float_layers_float(destination)
        return
    if p.mode == "dynamic":
        ort.quantize_dynamic(source, destination, p, exclude, only)
        return
    assert calibration is not None
    ort.quantize_static(source, destination, p, calibration, exclude, scratch, only, overrides)
    if p.preset != "tensorrt":  # per-axis activation DQ is ONNX Runtime's fix, not TensorRT's
        _keep_float_layers_float(destination)


def guarded_layers(path: Path) -> list[str]:
    """The float layers `_keep_float_layers_float` protected in the model at `path`."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [n.name.removesuffix("__float_dq") for n in graph.node
            if n.name.endswith("__float_dq")]


def _keep_float_layers_float(path: Path) -> None:
    """Stop ONNX Runtime from re-quantizing the layers left in float (qdq_graph.py)."""
    import onnx

    from edgebuild.quant.qdq_graph import keep_float_layers_float

    model = onnx.load(str(path))
    if keep_float_layers_float(model):
        onnx.save(model, str(path))
