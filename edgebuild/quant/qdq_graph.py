"""Rewrites of a QDQ model that decide what ONNX Runtime does with it.

**Float layers must stay float.** ONNX Runtime (1.20+) runs a graph
transformer, WeightBiasQuantization, at its *basic* optimization level: every
Conv/ConvTranspose/Gemm whose input comes from a per-tensor
DequantizeLinear and whose weight is a float32 initializer gets its weight
quantized to **per-tensor** symmetric INT8 (and its bias to INT32), so that it
fuses into a QLinearConv. A layer that `exclude_nodes` or accuracy-aware mode
kept in float — because it is the one INT8 breaks — is silently quantized
again, more coarsely than the quantizer would have done it. On
EfficientNet-Lite0 with the stem and the depthwise convolutions kept in float,
this turned 90 % agreement (the model as written) into 56 % (the model as run).

The transformer only fires on a *scalar* DQ scale. So a float layer fed by a
DequantizeLinear gets its own DequantizeLinear of the same integer tensor with
the same scale repeated per channel (axis 1): numerically identical, costs
nothing at run time (the dequantization happened anyway), and the layer runs
in float as the model says:

    Q ─▶ DQ(scale) ─▶ QLinear consumers          Q ─▶ DQ(scale) ─▶ QLinear consumers
              └─────▶ Conv(float W)       ==>     └─▶ DQ([scale] * C, axis=1) ─▶ Conv(float W)
"""

from __future__ import annotations

from typing import Any

import numpy as np

GUARDED_OPS = ("Conv", "ConvTranspose", "Gemm")


def _input_channels(node: Any, weight: np.ndarray) -> int | None:
    if node.op_type == "Conv":
        group = next((int(a.i) for a in node.attribute if a.name == "group"), 1)
        return int(weight.shape[1]) * group
    if node.op_type == "ConvTranspose":
        return int(weight.shape[0])
    trans_a = next((int(a.i) for a in node.attribute if a.name == "transA"), 0)
    if trans_a:  # input is K × N: the channel axis would be 0
        return None
    trans_b = next((int(a.i) for a in node.attribute if a.name == "transB"), 0)
    return int(weight.shape[1] if trans_b else weight.shape[0])


def keep_float_layers_float(model: Any) -> list[str]:
    """Give every float Conv/Gemm fed by a scalar DequantizeLinear a per-axis one.

    Modifies `model` (ModelProto) in place; returns the guarded node names.
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    guarded: list[str] = []
    additions: list[tuple[int, Any]] = []
    for index, node in enumerate(graph.node):
        if node.op_type not in GUARDED_OPS or len(node.input) < 2:
            continue
        weight_init = inits.get(node.input[1])
        dq = producers.get(node.input[0])
        if weight_init is None or weight_init.data_type != 1 or dq is None or \
                dq.op_type != "DequantizeLinear" or dq.input[1] not in inits:
            continue
        scale = numpy_helper.to_array(inits[dq.input[1]])
        if scale.size != 1:
            continue
        channels = _input_channels(node, numpy_helper.to_array(weight_init))
        if channels is None:
            continue
        tag = f"{node.input[0]}__float_dq_{len(guarded)}"
        args = [dq.input[0], tag + "_scale"]
        graph.initializer.append(numpy_helper.from_array(
            np.full(channels, scale.reshape(()), scale.dtype), tag + "_scale"))
        if len(dq.input) > 2 and dq.input[2]:
            zero = numpy_helper.to_array(inits[dq.input[2]])
            graph.initializer.append(numpy_helper.from_array(
                np.full(channels, zero.reshape(()), zero.dtype), tag + "_zero_point"))
            args.append(tag + "_zero_point")
        additions.append((index, helper.make_node("DequantizeLinear", args, [tag],
                                                  name=f"{node.name}__float_dq", axis=1,
                                                  domain=dq.domain)))
        node.input[0] = tag
        guarded.append(node.name)
    for index, dq_node in reversed(additions):  # keep topological order
        graph.node.insert(index, dq_node)
    return guarded


INT16 = (-32768, 32767)


def u8s8_saturation(model: Any, values: dict[str, np.ndarray], positions: int = 2000,
                    seed: int = 0) -> dict[str, float]:
    """Per quantized Conv/Gemm: the fraction of u8×s8 pair sums that overflow int16.

    Without VNNI, ONNX Runtime's x86 kernels multiply uint8 activations by int8
    weights with `vpmaddubsw`, which adds *adjacent pairs* of products into a
    saturating int16 before widening: a_k·w_k + a_k+1·w_k+1 beyond ±32767 is
    clipped. Pairs run along K in the im2col order (kernel row, kernel column,
    input channel) — measured on ONNX Runtime 1.31. Depthwise convolutions use
    another kernel and do not saturate. `values` maps each tensor quantized at a
    layer's input to float samples (N × C × H × W, or N × K for Gemm); the
    fraction is over `positions` sampled output positions, every row, every pair.
    """
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    producers = {o: n for n in model.graph.node for o in n.output}
    rng = np.random.default_rng(seed)
    rates: dict[str, float] = {}
    for node in model.graph.node:
        if node.op_type not in ("Conv", "Gemm") or _attr_int(node, "group", 1) != 1:
            continue
        wdq, xdq = producers.get(node.input[1]), producers.get(node.input[0])
        if wdq is None or xdq is None or wdq.op_type != "DequantizeLinear" or \
                xdq.op_type != "DequantizeLinear" or wdq.input[0] not in inits:
            continue
        weight = inits[wdq.input[0]]
        quant = producers.get(xdq.input[0])
        if weight.dtype != np.int8 or quant is None or quant.input[0] not in values or \
                inits.get(xdq.input[2] if len(xdq.input) > 2 else "",
                          np.zeros((), np.uint8)).dtype != np.uint8:
            continue
        scale = float(inits[xdq.input[1]])
        zero = int(inits[xdq.input[2]]) if len(xdq.input) > 2 and xdq.input[2] else 0
        a = np.clip(np.round(values[quant.input[0]] / scale) + zero, 0, 255).astype(np.int32)
        if node.op_type == "Conv":
            if weight.ndim not in (3, 4):  # a 3-D convolution: not measured
                continue
            if weight.ndim == 3:  # Conv1d (audio front ends): the 2-D case of height 1
                a, weight = a[:, :, None], weight[:, :, None]
            columns, rows = _im2col(node, a, zero, positions, rng), \
                weight.transpose(0, 2, 3, 1).reshape(weight.shape[0], -1)
        else:
            if _attr_int(node, "transA", 0):
                continue
            columns = a.reshape(len(a), -1)[rng.integers(0, len(a), positions)]
            rows = weight if _attr_int(node, "transB", 0) else weight.T
        rates[node.name] = _pair_overflow(columns, rows.astype(np.int32))
    return rates


def _attr_int(node: Any, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def _im2col(node: Any, a: np.ndarray, zero: int, positions: int,
            rng: np.random.Generator) -> np.ndarray:
    """`positions` random im2col columns (kh, kw, c order) of the uint8 input `a` (N C H W);
    a Conv1d's attributes (one spatial axis) are read as those of height 1."""
    def ints(name: str, default: list[int]) -> list[int]:
        return next((list(t.ints) for t in node.attribute if t.name == name), default)

    n = a.shape[0]
    one_d = len(ints("kernel_shape", [1, 1])) == 1
    kh, kw = [1, *ints("kernel_shape", [1])] if one_d else ints("kernel_shape", [1, 1])
    pads = ints("pads", [0, 0] if one_d else [0, 0, 0, 0])
    pads = [0, pads[0], 0, pads[1]] if one_d else pads
    sh, sw = [1, *ints("strides", [1])] if one_d else ints("strides", [1, 1])
    padded = np.pad(a, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                    constant_values=zero)
    out_h, out_w = (padded.shape[2] - kh) // sh + 1, (padded.shape[3] - kw) // sw + 1
    picks = rng.integers(0, [n, out_h, out_w], size=(positions, 3))
    return np.stack([padded[i, :, y * sh:y * sh + kh, x * sw:x * sw + kw]
                     .transpose(1, 2, 0).reshape(-1) for i, y, x in picks])


def _pair_overflow(columns: np.ndarray, rows: np.ndarray, chunk: int = 1 << 22) -> float:
    """Fraction of adjacent-pair sums (columns × rows) outside int16.

    Only a pair of weights whose same-signed parts add up to more than
    32767 / max(a) ≈ 128 can overflow with uint8 activations, and per-channel int8
    weights rarely hold two such neighbours: the sums are counted for those pairs alone,
    the others are in range by that bound (the count is the same as summing them all,
    tests/unit/test_u8s8_saturation.py; 1 % of the work on EfficientNet-Lite0).
    """
    k = rows.shape[1] - rows.shape[1] % 2
    even, odd = rows[:, 0:k:2], rows[:, 1:k:2]
    total = len(columns) * even.size
    largest = int(columns.max(initial=0))
    up = (np.maximum(even, 0) + np.maximum(odd, 0)) * largest > INT16[1]
    down = (np.minimum(even, 0) + np.minimum(odd, 0)) * largest < INT16[0]
    row, pair = np.nonzero(up | down)
    over = 0
    step = max(1, chunk // max(len(columns), 1))
    for start in range(0, len(pair), step):
        r, q = row[start:start + step], pair[start:start + step]
        sums = columns[:, 2 * q] * even[r, q] + columns[:, 2 * q + 1] * odd[r, q]
        over += int(np.count_nonzero((sums < INT16[0]) | (sums > INT16[1])))
    return over / max(total, 1)
