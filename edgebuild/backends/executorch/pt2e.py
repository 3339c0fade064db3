"""The PT2E int8 recipe for XNNPACK: which quantizer, which observers, and bias correction.

Two things XNNPACKQuantizer does not do, and what they cost EfficientNet-Lite0 (ReLU6
after every conv; docs/backends-executorch.md has the figures):

1. A conv or linear followed by ReLU6 (`aten.hardtanh(x, 0, 6)`) is not one pattern for
   it (its `conv_relu` takes `aten.relu` only): it quantizes the conv's output *before*
   the clamp and lets the hardtanh share that range, so the int8 codes cover values
   ReLU6 throws away (a conv output of -20..30 for a result in 0..6: a fifth of the
   codes used). XNNPACK runs the clamp fused into the conv anyway (its FuseActivation
   pass and partitioner take conv/linear -> hardtanh -> quantize), so `annotate_clamps`
   annotates the pair as `conv_relu` does a relu: inputs and weights at the conv, one
   observer on the clamped output.

       conv ─ [q/dq: conv's range] ─ hardtanh ─ [same q/dq] ─▶    XNNPACKQuantizer
       conv ─ hardtanh ─ [q/dq: the clamped range] ─▶             annotate_clamps

2. Bias correction (Nagel et al. 2019, §4.2; the quantize pass's `bias_correction`,
   edgebuild/quant/levers/bias_correction.py, for ONNX): rounding the weights shifts
   each layer's mean output, and the shifts add up through the network. `correct_biases`
   measures each quantized conv/linear's shift per output channel on the calibration
   data with the layer's FP32 input, and subtracts it from the layer's (float, BN-folded)
   bias in the calibrated model before convert_pt2e. XNNPACK quantizes that bias to
   int32 at lowering; the integer weights and activation ranges do not change.

Imported by lower.quantize only, inside a stage: torch, torchao and ExecuTorch are
imported in the functions that need them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from edgebuild.backends.executorch.options import ExecutorchOptions, Observer

ANNOTATION = "quantization_annotation"  # torchao's Q_ANNOTATION_KEY


def quantizer(options: ExecutorchOptions, keep: Callable[[Any], bool] | None) -> Any:
    """XNNPACKQuantizer with `options`' observer, quantizing the nodes `keep` accepts
    (all without it), conv/linear + hardtanh annotated as one pattern if `fuse_clamps`."""
    return xnnpack_quantizer(options.per_channel, options.observer, options.fuse_clamps, keep)


def xnnpack_quantizer(per_channel: bool, observer: Observer, fuse: bool,
                      keep: Callable[[Any], bool] | None) -> Any:
    """`quantizer`'s XNNPACKQuantizer from its settings (LiteRT-Torch's bias correction
    measures with one: litert_torch/bias.py)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer

    class ClampFusingQuantizer(XNNPACKQuantizer):  # type: ignore[misc]
        clamps_fused = 0  # conv/linear + hardtanh pairs annotated as one

        def annotate(self, model: Any) -> Any:
            if fuse:
                self.clamps_fused = annotate_clamps(model, self.global_config, self.filter_fn)
            return super().annotate(model)

    made = ClampFusingQuantizer().set_global(config(per_channel, observer))
    if keep is not None:
        made.set_filter_function(keep)
    return made


def config(per_channel: bool, observer: Observer) -> Any:
    """get_symmetric_quantization_config (int8 activations, per-tensor affine; symmetric
    int8 weights), its activation observer HistogramObserver or MinMaxObserver."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e import MinMaxObserver

    base = get_symmetric_quantization_config(is_per_channel=per_channel)
    if observer is Observer.HISTOGRAM:
        return base
    activation = dataclasses.replace(
        base.input_activation, observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-12))
    return dataclasses.replace(base, input_activation=activation,
                               output_activation=activation)


def annotate_clamps(model: Any, config: Any, keep: Callable[[Any], bool] | None) -> int:
    """Annotate each conv/linear whose only user is a hardtanh (ReLU6) as one pattern:
    the conv's input, weight and bias quantized, its output not, the hardtanh's output
    observed. Returns the number of pairs; the quantizer's own annotators skip them."""
    import torch
    from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

    gemms = {torch.ops.aten.conv1d.default, torch.ops.aten.conv2d.default,
             torch.ops.aten.convolution.default, torch.ops.aten.linear.default}
    clamps = {torch.ops.aten.hardtanh.default, torch.ops.aten.hardtanh_.default}
    fused = 0
    for clamp in model.graph.nodes:
        if clamp.op != "call_function" or clamp.target not in clamps:
            continue
        gemm = clamp.args[0]
        if (not isinstance(gemm, torch.fx.Node) or gemm.target not in gemms
                or len(gemm.users) != 1):
            continue
        params = [a for a in gemm.args[1:3] if isinstance(a, torch.fx.Node)]
        pattern = [clamp, gemm, *params]
        if any(ANNOTATION in n.meta and n.meta[ANNOTATION]._annotated for n in pattern):
            continue
        if keep is not None and not all(keep(n) for n in pattern):
            continue
        specs = {gemm.args[0]: config.input_activation, gemm.args[1]: config.weight}
        if len(gemm.args) > 2 and isinstance(gemm.args[2], torch.fx.Node):
            specs[gemm.args[2]] = config.bias
        gemm.meta[ANNOTATION] = QuantizationAnnotation(input_qspec_map=specs, _annotated=True)
        clamp.meta[ANNOTATION] = QuantizationAnnotation(
            output_qspec=config.output_activation, _annotated=True)
        for param in params:
            param.meta.setdefault(ANNOTATION, QuantizationAnnotation())._annotated = True
        fused += 1
    return fused


def correct_biases(prepared: Any, feeds: Iterable[tuple[Any, ...]]) -> dict[str, float]:
    """Subtract from each quantized conv/linear's bias in the calibrated `prepared` model
    its mean output shift per channel over `feeds` (`measure_shifts`); {layer: largest
    |shift|}."""
    import torch

    twin, shifts = measure_shifts(prepared, feeds)
    corrected: dict[str, float] = {}
    nodes = {n.name: n for n in twin.graph.nodes}
    for name, shift in shifts.items():
        node = nodes[name]
        bias = node.args[2] if len(node.args) > 2 else None
        if not isinstance(bias, torch.fx.Node) or bias.op != "get_attr":
            continue  # no bias to absorb it (every BN-folded conv has one)
        owner, _, attribute = str(bias.target).rpartition(".")
        tensor = getattr(prepared.get_submodule(owner) if owner else prepared, attribute)
        with torch.no_grad():
            tensor.sub_(shift)
        corrected[module_of(node) or name] = round(float(shift.abs().max()), 6)
    return corrected


def measure_shifts(prepared: Any, feeds: Iterable[tuple[Any, ...]]) -> tuple[Any, dict[str, Any]]:
    """(the float twin, {conv/linear node name: its mean output shift per channel}) of the
    calibrated `prepared` model over `feeds`; node names are `prepared`'s.

    Measured in a converted copy whose weights stay float (`fold_quantize=False`): run
    with its quantize/dequantize nodes as identities it is the FP32 model (BN folded),
    and at each layer a twin with the real quantize/dequantize on its input and weight
    gives the layer's own shift, not the ones of the layers before it.

        x ─────────────────── conv(x, W, b) ─────────┐
        x ─ q/dq ─ conv(·, q/dq(W), b) ─ − ─ mean(all but channels) ─▶ shift
    """
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e

    twin = convert_pt2e(copy.deepcopy(prepared), fold_quantize=False)
    measure = _shift_interpreter()(twin)
    count = 0
    with torch.no_grad():
        for feed in feeds:
            measure.run(*feed)
            count += 1
    return twin, {name: (total / count).to(torch.float32)
                  for name, total in measure.sums.items()}


def module_of(node: Any) -> str:
    """The PyTorch module a graph node came from (`_blocks.3._expand_conv`), or ''."""
    stack = node.meta.get("nn_module_stack") or {}
    return str(list(stack.values())[-1][0]) if stack else ""


def _shift_interpreter() -> Any:
    """The fx Interpreter that runs a converted PT2E graph in float and sums each
    quantized conv/linear's per-channel output shift (torch imported only when called)."""
    import torch
    from torch.fx import Interpreter, Node

    decomposed = torch.ops.quantized_decomposed
    quantize = {decomposed.quantize_per_tensor.default, decomposed.quantize_per_tensor.tensor,
                decomposed.quantize_per_channel.default}
    dequantize = {decomposed.dequantize_per_tensor.default,
                  decomposed.dequantize_per_tensor.tensor,
                  decomposed.dequantize_per_channel.default}
    linear = torch.ops.aten.linear.default
    gemms = {torch.ops.aten.conv1d.default, torch.ops.aten.conv2d.default, linear}

    def quantized(arg: Any) -> bool:
        return (isinstance(arg, Node) and arg.target in dequantize
                and isinstance(arg.args[0], Node) and arg.args[0].target in quantize)

    class Shifts(Interpreter):
        def __init__(self, module: Any) -> None:
            super().__init__(module, garbage_collect_values=False)
            self.sums: dict[str, Any] = {}

        def run_node(self, node: Node) -> Any:
            n: Any = node  # fx's Argument union, read as the op's args
            if n.op == "call_function" and (n.target in quantize or n.target in dequantize):
                return self.env[n.args[0]]  # the float model: q/dq are identities
            out = super().run_node(n)
            if (n.op == "call_function" and n.target in gemms
                    and quantized(n.args[0]) and quantized(n.args[1])):
                args = [self._quantized(a) if i < 2 else self._value(a)
                        for i, a in enumerate(n.args)]
                diff = n.target(*args, **n.kwargs) - out
                channel = diff.dim() - 1 if n.target == linear else 1
                axes = [d for d in range(diff.dim()) if d != channel]
                self.sums[n.name] = self.sums.get(n.name, 0) + diff.double().mean(axes)
            return out

        def _value(self, arg: Any) -> Any:
            return self.env[arg] if isinstance(arg, Node) else arg

        def _quantized(self, dq: Any) -> Any:
            """The value of `dq(q(x))` for x's float value: the layer's int8 view."""
            q = dq.args[0]
            codes = q.target(self.env[q.args[0]], *(self._value(a) for a in q.args[1:]))
            return dq.target(codes, *(self._value(a) for a in dq.args[1:]))

    return Shifts
