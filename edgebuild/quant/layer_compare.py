"""Per-layer comparison of an optimized ONNX model against its FP32 original.

Both models are run with every intermediate float tensor exposed as an output;
tensors are matched by name (the ORT quantizer keeps the original tensor names
on the float side of each Q/DQ pair). For each matched tensor we report its
relative error, and the error it *adds* over its inputs (its local
contribution): error accumulates downstream, so the layers that matter are
where it jumps, not where it is largest.

A tensor holding NaN or inf (in the FP32 model, the candidate, or both) has no
meaningful relative error: NaN compares false with everything, so a plain sort
would put it anywhere — it was once ranked "worst". Such layers are reported
apart (`non_finite`, saying in which model) and left out of every ranking.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgebuild.core.share_cpu import yield_when_idle

FLOAT_TYPES = (1, 10)  # onnx.TensorProto.FLOAT, FLOAT16


@dataclass(frozen=True)
class LayerError:
    node: str  # the node producing the tensor
    op_type: str
    tensor: str
    error: float  # ||a - b|| / ||a|| over the samples (NaN when `non_finite`)
    added: float  # error minus the largest error among its inputs
    non_finite: str = ""  # "", or where NaN/inf appeared: "fp32", "candidate", "both"

    @property
    def finite(self) -> bool:
        return not self.non_finite and bool(np.isfinite(self.error)) and \
            bool(np.isfinite(self.added))

    def to_json(self) -> dict[str, Any]:
        if not self.finite:
            return {"node": self.node, "op_type": self.op_type, "tensor": self.tensor,
                    "non_finite": self.non_finite or "error"}
        return {"node": self.node, "op_type": self.op_type, "tensor": self.tensor,
                "error": round(self.error, 6), "added": round(self.added, 6)}


def exposed_session(path: Path, threads: int = 1) -> tuple[Any, list[str]]:
    """An ORT session of `path` whose outputs include every float intermediate tensor."""
    import onnx
    import onnxruntime as ort

    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    known = {v.name: v for v in [*model.graph.value_info, *model.graph.output]}
    existing = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            info = known.get(name)
            if name and name not in existing and info is not None and \
                    info.type.tensor_type.elem_type in FLOAT_TYPES:
                model.graph.output.append(info)
                existing.add(name)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), yield_when_idle(so),
                                   providers=["CPUExecutionProvider"])
    return session, [o.name for o in session.get_outputs()]


def producers(path: Path) -> dict[str, str]:
    """Tensor name -> op type of the node producing it."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return {out: node.op_type for node in graph.node for out in node.output}


def run_all(path: Path, feeds: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Every exposed tensor of `path`, samples concatenated on axis 0 (float64)."""
    session, names = exposed_session(path)
    collected: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for feed in feeds:
        for name, value in zip(names, session.run(names, feed), strict=True):
            collected[name].append(np.asarray(value, dtype=np.float64).reshape(1, -1))
    # A tensor whose size changes from sample to sample (after NonMaxSuppression: one row
    # per detection) has no position-by-position error: it is left out.
    return {n: np.concatenate(v) for n, v in collected.items()
            if len({a.shape for a in v}) == 1}


class _Sums:
    """One tensor's error over the samples, accumulated one sample at a time."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.ref_sq = self.diff_sq = 0.0
        self.bad_ref = self.bad_got = False
        self.varies = False  # its size changed between samples (after NMS): left out

    def add(self, a: np.ndarray, b: np.ndarray) -> None:
        if a.shape != self.shape or b.shape != self.shape:
            self.varies = True
            return
        a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
        self.bad_ref |= not bool(np.isfinite(a64).all())
        self.bad_got |= not bool(np.isfinite(b64).all())
        if not (self.bad_ref or self.bad_got):
            self.ref_sq += float(a64 @ a64)
            diff = a64 - b64
            self.diff_sq += float(diff @ diff)

    def layer(self, node: str, op_type: str, tensor: str, inputs_error: float) -> LayerError:
        if self.bad_ref or self.bad_got:
            where = "both" if self.bad_ref and self.bad_got else \
                "fp32" if self.bad_ref else "candidate"
            return LayerError(node, op_type, tensor, float("nan"), float("nan"), where)
        norm = self.ref_sq ** 0.5
        error = self.diff_sq ** 0.5 / (norm if norm > 0 else 1.0)
        return LayerError(node, op_type, tensor, error, error - inputs_error)


def compare_layers(reference: Path, candidate: Path,
                   feeds: list[dict[str, np.ndarray]]) -> list[LayerError]:
    """Errors of every tensor the two models share, in the reference's node order.

    Both models run one sample at a time and each tensor's sums are kept, never the
    tensors: holding every intermediate tensor of every sample (float64, both models)
    ran PP-PicoDet at 800 x 608 out of memory on 6 pages."""
    import onnx

    ref_session, ref_names = exposed_session(reference)
    got_session, got_names = exposed_session(candidate)
    got_set = set(got_names)
    shared = [n for n in ref_names if n in got_set]
    sums: dict[str, _Sums] = {}
    for feed in feeds:
        ref = dict(zip(ref_names, ref_session.run(ref_names, feed), strict=True))
        got = dict(zip(got_names, got_session.run(got_names, feed), strict=True))
        for name in shared:
            a, b = np.asarray(ref[name]), np.asarray(got[name])
            sums.setdefault(name, _Sums(a.shape)).add(a, b)
        del ref, got
    graph = onnx.load(str(reference), load_external_data=False).graph
    # A quantizer may reroute a name (a Clip folded into a Q/DQ range): only a tensor
    # made by the same kind of op in both models is the same quantity.
    candidate_ops = producers(candidate)
    # A graph output is the same quantity whatever produces it: the quantizer moves the
    # name onto the DequantizeLinear after the output's node (the output Concat of a
    # detector), and leaving it out hid the layer that zeroed its scores.
    outputs = {o.name for o in graph.output}
    errors: dict[str, float] = {}
    layers: list[LayerError] = []
    for node in graph.node:
        inputs_error = max((errors.get(i, 0.0) for i in node.input), default=0.0)
        for tensor in node.output:
            found = sums.get(tensor)
            if found is None or found.varies or \
                    (candidate_ops.get(tensor) != node.op_type and tensor not in outputs):
                continue
            layers.append(found.layer(node.name or tensor, node.op_type, tensor,
                                      inputs_error))
            if layers[-1].finite:
                errors[tensor] = layers[-1].error
    return layers


def layer_error(node: str, op_type: str, tensor: str, a: np.ndarray, b: np.ndarray,
                inputs_error: float) -> LayerError:
    """The relative error of `b` against the reference `a`, or where either is non-finite."""
    bad_a, bad_b = not bool(np.isfinite(a).all()), not bool(np.isfinite(b).all())
    if bad_a or bad_b:
        where = "both" if bad_a and bad_b else "fp32" if bad_a else "candidate"
        return LayerError(node, op_type, tensor, float("nan"), float("nan"), where)
    norm = float(np.linalg.norm(a))
    error = float(np.linalg.norm(a - b)) / (norm if norm > 0 else 1.0)
    return LayerError(node, op_type, tensor, error, error - inputs_error)


def worst(layers: list[LayerError], count: int = 10) -> list[LayerError]:
    """The finite layers that add the most error, worst first (non-finite ones: `non_finite`)."""
    return sorted((layer for layer in layers if layer.finite), key=lambda layer: layer.added,
                  reverse=True)[:count]


def non_finite(layers: list[LayerError]) -> list[LayerError]:
    """The layers with NaN or inf in either model, in graph order."""
    return [layer for layer in layers if not layer.finite]


def first_divergence(layers: list[LayerError], threshold: float = 0.05) -> LayerError | None:
    """The first finite layer (graph order) whose relative error passes `threshold`."""
    return next((layer for layer in layers if layer.finite and layer.error > threshold), None)

