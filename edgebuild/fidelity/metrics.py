"""Fidelity figures that cannot be fooled: per channel, on a slice, decided agreement.

The whole-output cosine of a detector head `[1, 4+C, N]` (box pixels 0–320 stacked
with sigmoid scores 0–1) is the cosine of the boxes: zeroing every score leaves it at
0.9999. And a top-1 "flip" on a photo whose FP32 top-2 logits tie says nothing about
accuracy. These functions take (samples × …) arrays, as the outputs files store them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.recipe.models import OutputSlice

# Float32 outputs of order 1 carry noise near 1e-6; a sample whose values all stay below
# this (or 1e-3 of the dataset's largest value) is numerically zero: a blank heat map.
NEAR_ZERO_ABS = 1e-5
NEAR_ZERO_REL = 1e-3
PSNR_CAP_DB = 999.0  # identical outputs: the PSNR is infinite, JSON has no infinity
# A channel whose FP32 values stay under 1/10 of the largest channel's is "small-range":
# the candidates for a part a whole-output metric cannot see.
SMALL_RANGE = 0.1
FLIPS_KEPT = 20  # flips listed in a gate's details, the most decided first


@dataclass
class Comparison:
    """The metrics a gate checks, and what explains them (flips, the worst channels)."""

    metrics: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)


def take(values: np.ndarray, part: OutputSlice | None) -> np.ndarray:
    """`values[..., start:stop, ...]` along the slice's axis, or a clear error."""
    if part is None:
        return values
    axis = part.axis if part.axis > 0 else values.ndim + part.axis
    if not 1 <= axis < values.ndim:
        raise ValueError(f"slice axis {part.axis} is not an axis of the output, shaped "
                         f"{_shape(values)}")
    index = [slice(None)] * values.ndim
    index[axis] = slice(part.start, part.stop)
    kept = values[tuple(index)]
    if kept.shape[axis] == 0:
        raise ValueError(f"slice {part.label} of an output shaped {_shape(values)} is empty")
    return kept


def _shape(values: np.ndarray) -> str:
    return "[" + ", ".join(map(str, (1, *values.shape[1:]))) + "] a sample"


def non_finite(values: np.ndarray) -> dict[str, Any] | None:
    """Counts of NaN and ±Inf and the first samples holding one, or None if all finite."""
    import numpy as np

    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    samples = np.flatnonzero(bad.reshape(len(values), -1).any(axis=1))
    return {"values": int(bad.sum()), "nan": int(np.isnan(values).sum()),
            "inf": int(np.isinf(values).sum()), "samples": len(samples),
            "first_samples": [int(s) for s in samples[:10]]}


def value_metrics(got: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """Cosine, relative error, max abs error and PSNR of (samples × values) arrays."""
    import numpy as np

    got, ref = got.reshape(len(got), -1), ref.reshape(len(ref), -1)
    metrics: dict[str, float] = {}
    diff = got - ref
    metrics["max_abs_error"] = float(np.max(np.abs(diff))) if diff.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    zero = max(NEAR_ZERO_ABS, NEAR_ZERO_REL * scale)
    near_zero = (np.max(np.abs(ref), axis=1) <= zero) & (np.max(np.abs(got), axis=1) <= zero)
    got_norm, ref_norm = np.linalg.norm(got, axis=1), np.linalg.norm(ref, axis=1)
    norms = got_norm * ref_norm
    cosine = np.sum(got * ref, axis=1) / np.where(norms == 0, 1, norms)
    # Two numerically-zero outputs agree; their direction is noise, not a result.
    cosine = np.where(near_zero, 1.0, cosine)
    metrics["cosine"] = float(np.mean(cosine))
    metrics["near_zero_samples"] = float(np.sum(near_zero))
    floor = max(NEAR_ZERO_REL * float(np.max(ref_norm)) if len(ref) else 0.0, 1e-12)
    relative = np.linalg.norm(diff, axis=1) / np.maximum(ref_norm, floor)
    metrics["relative_error"] = float(np.mean(relative))
    mse = float(np.mean(diff ** 2))
    peak = float(np.max(ref) - np.min(ref)) if ref.size else 0.0
    metrics["psnr"] = (PSNR_CAP_DB if mse == 0 or peak == 0
                       else min(PSNR_CAP_DB, 10 * float(np.log10(peak ** 2 / mse))))
    return metrics


def _channels(values: np.ndarray, axis: int) -> np.ndarray:
    """(channels × samples × rest): one row of per-sample vectors per channel."""
    import numpy as np

    moved = np.moveaxis(values, axis, 0)
    return moved.reshape(moved.shape[0], moved.shape[1], -1)


def per_channel(got: np.ndarray, ref: np.ndarray, axis: int) -> Comparison:
    """Cosine, relative error and PSNR of each channel along `axis` (each per sample, as
    for the whole output), gated on the worst channel; the whole output's beside them."""
    resolved = axis if axis > 0 else ref.ndim + axis
    if not 1 <= resolved < ref.ndim:
        raise ValueError(f"channel_axis {axis} is not an axis of the output, shaped "
                         f"{_shape(ref)}")
    got_c, ref_c = _channels(got, resolved), _channels(ref, resolved)
    if ref_c.shape[2] < 2:
        raise ValueError(f"channel_axis {axis} leaves one value per sample in each channel "
                         f"(output {_shape(ref)}): a cosine of one value is only its sign; "
                         "use it on an output with another axis (a head's anchors, a map's "
                         "pixels) or gate max_abs_error")
    rows = [value_metrics(g, r) for g, r in zip(got_c, ref_c, strict=True)]
    whole = value_metrics(got, ref)
    metrics = {**whole, "channels": float(len(rows))}
    worst: dict[str, Any] = {}
    for key, worst_is_low in (("cosine", True), ("relative_error", False), ("psnr", True)):
        values = [row[key] for row in rows]
        index = values.index(min(values) if worst_is_low else max(values))
        metrics[f"whole_{key}"] = whole[key]
        metrics[key] = rows[index][key]
        worst[key] = {"channel": index, "value": rows[index][key]}
    return Comparison(metrics, {"channel_axis": axis, "worst_channel": worst})


def blind_part(ref: np.ndarray, task: str,
               limits: dict[str, float]) -> dict[str, Any] | None:
    """The small-range channels a whole-output gate could not see destroyed, or None.

    Looks along the output's shortest axis of two or more (the channels of a head
    `[1, 4+C, N]` or `[1, N, 5+C]`, of an NCHW map), when there is another such axis:
    channels whose FP32 values stay under SMALL_RANGE of the largest channel's. If
    FP32 with exactly those channels zeroed would still pass every scaled limit, the
    gate is blind to them, and it refuses instead of passing a destroyed part.
    """
    import numpy as np

    if task == "dense" or not limits:  # a map's rows and columns are not channels
        return None
    axes = [a for a in range(1, ref.ndim) if ref.shape[a] >= 2]
    if len(axes) < 2:
        return None
    axis = min(axes, key=lambda a: ref.shape[a])
    scales = np.max(np.abs(_channels(ref, axis)), axis=(1, 2))
    small = np.flatnonzero(scales < SMALL_RANGE * scales.max())
    if len(small) == 0 or len(small) == len(scales):
        return None
    zeroed = np.moveaxis(ref.copy(), axis, 0)
    zeroed[small] = 0
    seen = value_metrics(np.moveaxis(zeroed, 0, axis), ref)
    fooled = {k: seen[m] for k, m in (("min_cosine", "cosine"),
                                      ("max_relative_error", "relative_error"),
                                      ("min_psnr", "psnr")) if k in limits}
    passes = all(seen[m] >= limits[k] if k.startswith("min") else seen[m] <= limits[k]
                 for k, m in (("min_cosine", "cosine"), ("max_relative_error",
                                                          "relative_error"),
                              ("min_psnr", "psnr")) if k in limits)
    if not passes:
        return None
    large = np.setdiff1d(np.arange(len(scales)), small)
    return {"axis": axis, "channels": _ranges(small), "small_max": float(scales[small].max()),
            "large_max": float(scales[large].max()), "zeroed_metrics": fooled,
            "parts": parts(small, len(scales))}


def parts(small: np.ndarray, count: int) -> list[tuple[int | None, int | None]]:
    """The runs of small- and large-range channels along the axis, as `(start, stop)` of a
    slice each (None: the axis's end), when they are at most three: the slices that gate
    each part on its own (`[(None, 4), (4, None)]` for a head's boxes and scores)."""
    small_set = {int(i) for i in small}
    bounds = [i for i in range(1, count) if (i in small_set) != (i - 1 in small_set)]
    if len(bounds) > 2:
        return []
    edges: list[int | None] = [None, *bounds, None]
    return list(pairwise(edges))


def _ranges(indices: np.ndarray) -> str:
    """`4–83` or `0, 2, 5–9`: indices as runs."""
    runs: list[list[int]] = []
    for i in (int(v) for v in indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in runs)


def decided_agreement(got: np.ndarray, ref: np.ndarray, margin: float | None) -> Comparison:
    """Every top-1 flip with its FP32 margin (top-1 − top-2), the most decided first; with
    `margin`, the agreement over the samples FP32 decides by at least that much: a flip
    on a near-tie says nothing about accuracy."""
    import numpy as np

    got, ref = got.reshape(len(got), -1), ref.reshape(len(ref), -1)
    if ref.shape[1] < 2:
        raise ValueError("decided agreement needs two classes or more to have a top-2")
    top2 = np.sort(ref, axis=1)[:, -2:]
    gaps = top2[:, 1] - top2[:, 0]
    ref_top1, top1 = ref.argmax(axis=1), got.argmax(axis=1)
    decided = gaps >= (margin if margin is not None else -np.inf)
    agree = top1 == ref_top1
    metrics = {"flips": float((~agree).sum())}
    if margin is not None:
        metrics.update({"decided_samples": float(decided.sum()), "margin": margin,
                        "decided_flips": float((~agree & decided).sum())})
        if decided.any():
            metrics["decided_agreement"] = 100.0 * float(np.mean(agree[decided]))
    flipped = np.flatnonzero(~agree)
    order = flipped[np.argsort(-gaps[flipped], kind="stable")]
    flips = [{"sample": int(i), "fp32_margin": round(float(gaps[i]), 6),
              "fp32_class": int(ref_top1[i]), "class": int(top1[i]),
              **({"decided": bool(decided[i])} if margin is not None else {})}
             for i in order[:FLIPS_KEPT]]
    return Comparison(metrics, {"flips": flips, **({"margin": margin} if margin else {})})
