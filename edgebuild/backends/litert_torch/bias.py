"""Bias correction for LiteRT-Torch's int8: measured in PyTorch, absorbed by the float model.

ai-edge-quantizer has no bias correction (its algorithms: min/max, MSE, OCTAV, GPTQ,
Hadamard rotation, …, ai_edge_quantizer/algorithms of 0.10.0), and rounding the weights
shifts each layer's mean output; the shifts add up through the network. As the onnx2tf
route does for TFLite's converter (`quantize` with `emit: corrected-float`), the shift
is measured for the quantizer's scheme and handed over in the *float* model:

    model ─ torch.export ─ prepare_pt2e(XNNPACKQuantizer: symmetric per-channel int8
          weights, asymmetric int8 activations, min/max ranges: ai-edge-quantizer's
          static_wi8_ai8 scheme) ─ calibrate ─ pt2e.measure_shifts
          ─▶ a copy of `model` with each shift subtracted from the bias after the layer:
             the BatchNorm's that follows a conv (LiteRT-Torch folds it into the conv), or
             the conv's / linear's own

The per-layer measurement is the ExecuTorch backend's (executorch/pt2e.py), so this needs
ExecuTorch's quantizer installed (the default install has it). Layers in `keep_float`
are not quantized in the twin and keep their biases.
"""

from __future__ import annotations

import copy
from typing import Any

BATCH_NORMS = ("aten.batch_norm.default", "aten._native_batch_norm_legit_no_training.default")
GEMMS = ("aten.conv1d.default", "aten.conv2d.default", "aten.convolution.default",
         "aten.linear.default")


def corrected(model: Any, inputs: tuple[Any, ...], feeds: list[tuple[Any, ...]],
              keep: list[str]) -> tuple[Any, dict[str, float]]:
    """(a copy of `model` with its int8 bias shifts absorbed, {module whose bias changed:
    largest |shift|}), measured on `feeds` (each the model's positional inputs)."""
    import torch

    from edgebuild.backends.executorch import lower, pt2e
    from edgebuild.backends.executorch.options import Observer

    with lower.needs_executorch():
        from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

        captured = lower.export(copy.deepcopy(model), inputs,
                                "torch.export (for bias correction)").module()
        owners = bias_owners(captured)
        quantizer = pt2e.xnnpack_quantizer(True, Observer.MINMAX, True,
                                           lower.not_in(keep) if keep else None)
        prepared = prepare_pt2e(captured, quantizer)
        with torch.no_grad():
            for feed in feeds:
                prepared(*feed)
        _, shifts = pt2e.measure_shifts(prepared, feeds)
    result = copy.deepcopy(model)
    done: dict[str, float] = {}
    for node, shift in shifts.items():
        bias = getattr(result.get_submodule(owners[node]), "bias", None) if node in owners \
            else None
        if not isinstance(bias, torch.nn.Parameter) or bias.shape != shift.shape:
            continue  # no bias after the layer to absorb it
        with torch.no_grad():
            bias.sub_(shift.to(bias.dtype))
        done[owners[node]] = round(float(shift.abs().max()), 6)
    return result, done


def bias_owners(captured: Any) -> dict[str, str]:
    """{conv/linear node: the module whose bias is added to its output}: the BatchNorm it
    alone feeds, else the module that called it."""
    from edgebuild.backends.executorch import pt2e

    owners: dict[str, str] = {}
    for node in captured.graph.nodes:
        if node.op != "call_function" or str(node.target) not in GEMMS:
            continue
        users = list(node.users)
        after = users[0] if len(users) == 1 and str(users[0].target) in BATCH_NORMS else node
        module = pt2e.module_of(after)
        if module:
            owners[node.name] = module
    return owners
