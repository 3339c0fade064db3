"""Cross-layer equalization (CLE) of an ONNX graph, kept exact around ReLU6.

Nagel et al. 2019 ("Data-Free Quantization Through Weight Equalization and
Bias Correction"): for two convolutions joined by a positive-homogeneous
activation, dividing output channel i of the first by s_i and multiplying
input channel i of the second by s_i computes the same function. Choosing
s_i = sqrt(r1_i / r2_i) (r = the channel's largest |weight|) gives both
channels the same range, which repairs depthwise-separable networks whose
channels differ by orders of magnitude:

    conv1 ──▶ Clip(0, c) / Relu / nothing ──▶ conv2
    W1[i] /= s_i, b1[i] /= s_i                W2[:, i] *= s_i

ReLU6 (`Clip(0, 6)`) is not positive-homogeneous: clip(y / s, 0, 6) equals
clip(y, 0, 6) / s only while the clip bound cannot be reached. ONNX Clip takes
scalar bounds, so a per-channel bound 6 / s_i cannot be written without an
extra float op that would stop ONNX Runtime fusing Conv+Clip. `clip` chooses:

- `exact` (default): scale channel i of a clipped pair only if its
  pre-activation is *proven* to stay below c (interval arithmetic from the
  input's range through the graph), and then no further than that bound
  allows (s_i >= U_i / c); other channels keep s_i = 1. The FP32 function is
  unchanged (to float rounding) for inputs within the given input range.
- `calibrated`: the same rule with U_i = the largest pre-activation seen on
  the calibration data: equal on that data, not proven for unseen inputs.
- `relu`: the paper's choice, replace ReLU6 by ReLU and scale freely. This
  changes the function wherever ReLU6 clipped.

Pure numpy + onnx; imported only inside the worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

ClipPolicy = Literal["exact", "calibrated", "relu"]
Interval = tuple[np.ndarray, np.ndarray]  # per-channel lower and upper bounds


@dataclass
class Pair:
    """conv1 -> optional activation -> conv2, the intermediate used by nothing else."""

    conv1: Any  # onnx NodeProto
    act: Any | None
    conv2: Any
    clip_high: float | None  # c of Clip(0, c); None for Relu or no activation

    @property
    def tensor(self) -> str:
        """conv1's output (the pre-activation whose channels are scaled)."""
        return str(self.conv1.output[0])


@dataclass
class EqualizeResult:
    pairs: int = 0
    iterations: int = 0
    scaled_channels: int = 0  # channels whose final scale is not 1
    channels: int = 0
    clips_replaced: int = 0
    pinned_by_clip: int = 0  # channels kept at s = 1 because a clip bound may be reached
    range_ratio_before: float = 0.0  # median over pairs of max/min channel range of W1
    range_ratio_after: float = 0.0
    per_pair: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "iterations": self.iterations,
                "scaled_channels": self.scaled_channels, "channels": self.channels,
                "clips_replaced": self.clips_replaced, "pinned_by_clip": self.pinned_by_clip,
                "weight_range_ratio_median": {"before": round(self.range_ratio_before, 2),
                                              "after": round(self.range_ratio_after, 2)}}


def _attr(node: Any, name: str, default: Any) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _consumers(graph: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _clip_bounds(node: Any, inits: Mapping[str, np.ndarray]) -> tuple[float, float] | None:
    """(low, high) of a Clip with constant bounds, else None."""
    if len(node.input) > 1:  # opset >= 11: bounds are inputs
        bounds = []
        for index, default in ((1, -np.inf), (2, np.inf)):
            name = node.input[index] if len(node.input) > index else ""
            if not name:
                bounds.append(default)
            elif name in inits:
                bounds.append(float(inits[name]))
            else:
                return None
        return bounds[0], bounds[1]
    return float(_attr(node, "min", -np.inf)), float(_attr(node, "max", np.inf))


def _input_channels_ok(conv2: Any, channels: int, inits: Mapping[str, np.ndarray]) -> bool:
    w2 = inits[conv2.input[1]]
    group = int(_attr(conv2, "group", 1))
    if group == 1:
        return int(w2.shape[1]) == channels
    return group == channels and int(w2.shape[1]) == 1  # depthwise (any multiplier)


def find_pairs(model: Any) -> list[Pair]:
    """Every conv1 -> [Relu | Clip(0, c)] -> conv2 chain CLE can rescale exactly."""
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    consumers = _consumers(graph)
    outputs = {o.name for o in graph.output}
    pairs: list[Pair] = []

    def only_consumer(tensor: str) -> Any | None:
        users = consumers.get(tensor, [])
        return users[0] if len(users) == 1 and tensor not in outputs else None

    def is_conv(node: Any) -> bool:
        return bool(node.op_type == "Conv" and len(node.input) >= 2 and node.input[1] in inits
                    and (len(node.input) < 3 or not node.input[2] or node.input[2] in inits))

    for conv1 in graph.node:
        if not is_conv(conv1):
            continue
        nxt = only_consumer(conv1.output[0])
        act, high = None, None
        if nxt is not None and nxt.op_type in ("Relu", "Clip"):
            if nxt.op_type == "Clip":
                bounds = _clip_bounds(nxt, inits)
                if bounds is None or bounds[0] != 0.0 or not np.isfinite(bounds[1]):
                    continue
                high = bounds[1]
            act, nxt = nxt, only_consumer(nxt.output[0])
        if nxt is None or not is_conv(nxt) or nxt.input[0] != (act or conv1).output[0]:
            continue
        if _input_channels_ok(nxt, int(inits[conv1.input[1]].shape[0]), inits):
            pairs.append(Pair(conv1, act, nxt, high))
    return pairs


def interval_bounds(model: Any, input_ranges: Mapping[str, Interval]) -> dict[str, Interval]:
    """Per-channel [low, high] of every tensor reachable by interval arithmetic.

    Covers the ops of a folded CNN (Conv, Clip, Relu, Add, pooling, Reshape of
    a pooled vector); a tensor made by anything else has no entry, nor does
    anything downstream of it. Zero padding adds 0 to a conv's input interval.
    """
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    bounds: dict[str, Interval] = {k: (np.asarray(lo, np.float64), np.asarray(hi, np.float64))
                                   for k, (lo, hi) in input_ranges.items()}
    for node in graph.node:
        if not node.input or node.input[0] not in bounds:  # a Constant has no input
            continue
        lo, hi = bounds[node.input[0]]
        result: Interval | None = None
        if node.op_type == "Conv" and node.input[1] in inits:
            result = _conv_interval(node, inits, lo, hi)
        elif node.op_type == "Relu":
            result = (np.maximum(lo, 0), np.maximum(hi, 0))
        elif node.op_type == "Clip":
            clip = _clip_bounds(node, inits)
            if clip is not None:
                result = (np.clip(lo, *clip), np.clip(hi, *clip))
        elif node.op_type == "Add" and all(n in bounds for n in node.input):
            other = bounds[node.input[1]]
            result = (lo + other[0], hi + other[1])
        elif node.op_type in ("GlobalAveragePool", "GlobalMaxPool", "MaxPool", "AveragePool",
                              "Identity", "Flatten", "Reshape"):
            result = (lo, hi)
        if result is not None:
            bounds[node.output[0]] = result
    return bounds


def _conv_interval(node: Any, inits: Mapping[str, np.ndarray], lo: np.ndarray,
                   hi: np.ndarray) -> Interval:
    w = inits[node.input[1]].astype(np.float64)
    out_c, per_group = int(w.shape[0]), int(w.shape[1])
    group = int(_attr(node, "group", 1))
    bias = inits[node.input[2]].astype(np.float64) if len(node.input) > 2 and node.input[2] \
        else np.zeros(out_c)
    in_c = per_group * group
    lo = np.broadcast_to(lo, (in_c,)).astype(np.float64)
    hi = np.broadcast_to(hi, (in_c,)).astype(np.float64)
    if any(_attr(node, "pads", [0]) or [0]) or _attr(node, "auto_pad", b"NOTSET") not in \
            (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        lo, hi = np.minimum(lo, 0), np.maximum(hi, 0)
    kernel = tuple(range(2, w.ndim))  # the spatial axes: 1 (Conv1d) or 2 (Conv2d)
    pos, neg = np.maximum(w, 0).sum(axis=kernel), np.minimum(w, 0).sum(axis=kernel)  # out × per
    out_per_group = out_c // group
    low, high = np.empty(out_c), np.empty(out_c)
    for g in range(group):
        rows = slice(g * out_per_group, (g + 1) * out_per_group)
        cols = slice(g * per_group, (g + 1) * per_group)
        low[rows] = pos[rows] @ lo[cols] + neg[rows] @ hi[cols]
        high[rows] = pos[rows] @ hi[cols] + neg[rows] @ lo[cols]
    return low + bias, high + bias


def _columns(w2: np.ndarray, group: int, channels: int) -> np.ndarray:
    """|W2| reduced to one range per input channel of conv2."""
    a = np.abs(w2)
    if group == 1:
        return np.asarray(a.max(axis=(0, *range(2, a.ndim))))
    multiplier = a.shape[0] // channels
    return np.asarray(a.reshape(channels, multiplier, -1).max(axis=(1, 2)))


def _scale_columns(w2: np.ndarray, group: int, s: np.ndarray) -> np.ndarray:
    spatial = (1,) * (w2.ndim - 2)  # Conv1d or Conv2d weights
    if group == 1:
        return np.asarray(w2 * s.reshape(1, -1, *spatial))
    multiplier = w2.shape[0] // len(s)
    return np.asarray(w2 * np.repeat(s, multiplier).reshape(-1, 1, *spatial))


def equalize(model: Any, clip: ClipPolicy = "exact", iterations: int = 20,
             upper_bounds: Mapping[str, np.ndarray] | None = None,
             tolerance: float = 1e-3) -> EqualizeResult:
    """Equalize `model` (an onnx ModelProto, modified in place); see the module docstring.

    `upper_bounds`: tensor name -> per-channel upper bound of every pair's
    pre-activation (conv1's output), in the original model's units; needed for
    clipped pairs unless `clip` is `relu` (a clipped pair without one is left
    alone).
    """
    from onnx import numpy_helper

    graph = model.graph
    pairs = find_pairs(model)
    result = EqualizeResult(pairs=len(pairs))
    if not pairs:
        return result
    by_name = {i.name: i for i in graph.initializer}
    weights: dict[str, np.ndarray] = {}

    def weight(name: str) -> np.ndarray:
        if name not in weights:
            weights[name] = numpy_helper.to_array(by_name[name]).astype(np.float64)
        return weights[name]

    _unshare(model, pairs)
    by_name = {i.name: i for i in graph.initializer}
    biases = {p.tensor: _bias_name(model, p.conv1) for p in pairs}
    by_name = {i.name: i for i in graph.initializer}
    if clip == "relu":
        for p in pairs:
            if p.clip_high is not None:
                _to_relu(p.act)
                result.clips_replaced += 1
                p.clip_high = None
    # Feasible cumulative scales per pair: [low, high] per channel (s = 1 when pinned).
    feasible: list[tuple[np.ndarray, np.ndarray]] = []
    for p in pairs:
        channels = weight(p.conv1.input[1]).shape[0]
        low, high = np.full(channels, 1e-8), np.full(channels, np.inf)
        if p.clip_high is not None:
            bound = None if upper_bounds is None else upper_bounds.get(p.tensor)
            if bound is None:
                low, high = np.ones(channels), np.ones(channels)
            else:
                bound = np.broadcast_to(np.asarray(bound, np.float64), (channels,))
                inside = bound <= p.clip_high
                low = np.where(inside, np.maximum(bound / p.clip_high, 1e-8), 1.0)
                high = np.where(inside, np.inf, 1.0)
                result.pinned_by_clip += int(np.sum(~inside))
        feasible.append((low, high))
    ratios_before = [_range_ratio(weight(p.conv1.input[1])) for p in pairs]
    cumulative = [np.ones(weight(p.conv1.input[1]).shape[0]) for p in pairs]
    for iteration in range(iterations):
        largest = 0.0
        for k, p in enumerate(pairs):
            w1, w2 = weight(p.conv1.input[1]), weight(p.conv2.input[1])
            group2 = int(_attr(p.conv2, "group", 1))
            r1 = np.abs(w1).reshape(w1.shape[0], -1).max(axis=1)
            r2 = _columns(w2, group2, w1.shape[0])
            s = np.ones_like(r1)
            ok = (r1 > 0) & (r2 > 0)
            s[ok] = np.sqrt(r1[ok] / r2[ok])
            target = np.clip(cumulative[k] * s, *feasible[k])
            step = target / cumulative[k]
            cumulative[k] = target
            largest = max(largest, float(np.max(np.abs(np.log(step)))))
            weights[p.conv1.input[1]] = w1 / step.reshape(-1, *(1,) * (w1.ndim - 1))
            if biases[p.tensor]:
                weights[biases[p.tensor]] = weight(biases[p.tensor]) / step
            weights[p.conv2.input[1]] = _scale_columns(w2, group2, step)
        result.iterations = iteration + 1
        if largest < tolerance:
            break
    for name, value in weights.items():
        dtype = numpy_helper.to_array(by_name[name]).dtype
        by_name[name].CopyFrom(numpy_helper.from_array(value.astype(dtype), name))
    result.channels = int(sum(len(c) for c in cumulative))
    result.scaled_channels = int(sum(np.sum(np.abs(c - 1) > 1e-6) for c in cumulative))
    result.range_ratio_before = float(np.median(ratios_before))
    result.range_ratio_after = float(np.median([_range_ratio(weight(p.conv1.input[1]))
                                                for p in pairs]))
    return result


def _range_ratio(w: np.ndarray) -> float:
    r = np.abs(w).reshape(w.shape[0], -1).max(axis=1)
    r = r[r > 0]
    return float(r.max() / r.min()) if len(r) else 1.0


def _to_relu(node: Any) -> None:
    node.op_type = "Relu"
    del node.input[1:]
    del node.attribute[:]


def _unshare(model: Any, pairs: list[Pair]) -> None:
    """Give every weight and bias a pair touches its own initializer."""
    from onnx import numpy_helper

    graph = model.graph
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    by_name = {i.name: i for i in graph.initializer}
    for node in {id(n): n for p in pairs for n in (p.conv1, p.conv2)}.values():
        for index in (1, 2):
            if len(node.input) > index and uses.get(node.input[index], 0) > 1:
                name = f"{node.input[index]}__cle_{node.name or id(node)}"
                array = numpy_helper.to_array(by_name[node.input[index]])
                graph.initializer.append(numpy_helper.from_array(array.copy(), name))
                uses[node.input[index]] -= 1
                node.input[index] = name


def _bias_name(model: Any, conv: Any) -> str:
    """conv's bias initializer, created (zeros) if it had none."""
    from onnx import numpy_helper

    if len(conv.input) > 2 and conv.input[2]:
        return str(conv.input[2])
    by_name = {i.name: i for i in model.graph.initializer}
    w = numpy_helper.to_array(by_name[conv.input[1]])
    name = f"{conv.input[1]}__cle_bias"
    model.graph.initializer.append(numpy_helper.from_array(np.zeros(w.shape[0], w.dtype), name))
    while len(conv.input) < 3:
        conv.input.append("")
    conv.input[2] = name
    return name
