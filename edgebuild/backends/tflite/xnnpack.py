"""Why XNNPACK refused a model, in terms of the model's own ops.

TFLite's interpreter only says "failed to create XNNPACK runtime / Node number N
(TfLiteXNNPackDelegate) failed to prepare": N is the delegate's node, which stands
for a whole partition of the model. The refusal seen on int8 models comes from
XNNPACK's operator constructors, which reject a quantized convolution or fully
connected layer whose requantization scale, input scale × kernel scale / output
scale, is 256 or more in any output channel (google/XNNPACK
src/operators/convolution-nhwc.c and fully-connected-nc.c:
"requantization scale ... is greater or equal to 256.0"; TFLite's builtin kernels
accept it). Calibration produces it when a layer's output range is far narrower
than its weights suggest (weights that cancel, a dead channel). This module finds
those layers by reading the scales out of the flatbuffer, so the message can name
the op, its index and its output tensor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# XNNPACK's limit on input_scale * kernel_scale / output_scale (see the module doc).
MAX_REQUANTIZATION_SCALE = 256.0

# op name -> (activation input index, weight input index) in the TFLite op's inputs.
_WEIGHTED_OPS = {"CONV_2D": (0, 1), "DEPTHWISE_CONV_2D": (0, 1), "FULLY_CONNECTED": (0, 1),
                 "TRANSPOSE_CONV": (2, 1)}

_REFUSAL = re.compile(r"XNNPACK|TfLiteXNNPackDelegate", re.IGNORECASE)


def is_refusal(error: BaseException) -> bool:
    """Whether an interpreter error is XNNPACK refusing the model (not a model bug)."""
    return bool(_REFUSAL.search(str(error)))


@dataclass(frozen=True)
class Suspect:
    """A layer XNNPACK cannot create."""

    op_index: int
    op_name: str
    output: str
    scale: float  # the largest requantization scale over its output channels
    channel: int

    def describe(self) -> str:
        return (f"{self.op_name} op #{self.op_index} (output '{self.output}'): requantization "
                f"scale {self.scale:.4g} in output channel {self.channel} (input scale × "
                f"kernel scale / output scale; XNNPACK needs < {MAX_REQUANTIZATION_SCALE:g})")


def suspects(model: Path) -> list[Suspect]:
    """The quantized layers of `model` whose requantization scale XNNPACK rejects."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(
        model_path=str(model),
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    found = []
    for op in interpreter._get_ops_details():  # the only listing of ops the API offers
        slots = _WEIGHTED_OPS.get(op["op_name"])
        if slots is None or len(op["inputs"]) <= max(slots) or not len(op["outputs"]):
            continue
        data, weights = (tensors.get(int(op["inputs"][i])) for i in slots)
        out = tensors.get(int(op["outputs"][0]))
        if data is None or weights is None or out is None:
            continue
        worst = _worst_scale(data, weights, out)
        if worst is not None and worst[0] >= MAX_REQUANTIZATION_SCALE:
            found.append(Suspect(int(op["index"]), op["op_name"], out["name"], *worst))
    return found


def _worst_scale(data: dict[str, Any], weights: dict[str, Any],
                 out: dict[str, Any]) -> tuple[float, int] | None:
    scales = [t["quantization_parameters"]["scales"] for t in (data, weights, out)]
    if any(len(s) == 0 for s in scales) or len(scales[0]) != 1 or len(scales[2]) != 1:
        return None  # float, or per-axis activations: not XNNPACK's quantized path
    per_channel = scales[1] * float(scales[0][0]) / float(scales[2][0])
    channel = int(per_channel.argmax())
    return float(per_channel[channel]), channel


def explain(error: BaseException, model: Path) -> str:
    """One line: what XNNPACK said, and which layer(s) of the model cause it."""
    said = " ".join(str(error).split())
    try:
        found = suspects(model)
    except (RuntimeError, ValueError) as exc:  # the diagnosis must not hide the refusal
        return f"XNNPACK refused the model ({said}); could not read its layers: {exc}"
    if not found:
        return f"XNNPACK refused the model ({said}); no layer breaks its known limits"
    layers = "; ".join(s.describe() for s in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return f"XNNPACK refused the model ({said}): {layers}{more}"
