"""The positive region of a sparse binary map: recall and IoU instead of agreement.

A text detector's heat map is positive (above its threshold) on well under 5 % of its
pixels. Agreement counts every pixel alike, so a build that finds nothing agrees on
100 % minus FP32's positive rate: CRAFT's INT8 build that read no word scored 99.91 %.
What an app keeps is the positive *regions* — EasyOCR keeps a CRAFT box only where a
connected region above 0.4 peaks at 0.7 or more — so these metrics judge those:

    map > threshold ──connected (face neighbours)──▶ regions ──peak ≥ peak_threshold──▶ kept

`region_recall`: FP32's kept regions the build finds (at least half of a region's values
inside the build's kept regions), percent; `region_iou`: the kept regions' IoU, build vs
FP32, per sample (a sample neither marks is skipped), mean, percent. These functions take
(samples × …) arrays, as the outputs files store them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

FOUND = 0.5  # an FP32 region is found when the build's kept regions cover this share of it
# Positives rarer than this (percent of FP32's decisions) make agreement blind: deciding
# negative everywhere scores 100 % minus them.
RARE_POSITIVE = 5.0
WORST_KEPT = 5  # samples listed in a gate's details, the lowest IoU first


def components(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """Connected regions of a boolean array (neighbours share a face, along every axis):
    a label per element (-1 outside any region) and how many regions there are.

    Min-label propagation with pointer jumping over the edges between neighbouring
    positive elements: vectorised, a few rounds for compact regions."""
    import numpy as np

    flat = mask.reshape(-1)
    where = np.flatnonzero(flat)
    index = np.full(flat.size, -1, dtype=np.int64)
    index[where] = np.arange(len(where))
    pairs = []
    for axis in range(mask.ndim):
        lower = [slice(None)] * mask.ndim
        upper = [slice(None)] * mask.ndim
        lower[axis], upper[axis] = slice(0, -1), slice(1, None)
        both = mask[tuple(lower)] & mask[tuple(upper)]
        positions = np.argwhere(both)
        if len(positions):
            first = np.ravel_multi_index(positions.T, mask.shape)
            positions[:, axis] += 1
            second = np.ravel_multi_index(positions.T, mask.shape)
            pairs.append((index[first], index[second]))
    parent = np.arange(len(where))
    if pairs:
        a = np.concatenate([p[0] for p in pairs])
        b = np.concatenate([p[1] for p in pairs])
        while True:
            low = np.minimum(parent[a], parent[b])
            before = parent.copy()
            np.minimum.at(parent, parent[a], low)
            np.minimum.at(parent, parent[b], low)
            while True:  # pointer jumping: every element to its root
                jumped = parent[parent]
                if np.array_equal(jumped, parent):
                    break
                parent = jumped
            if np.array_equal(parent, before):
                break
    roots, compact = np.unique(parent, return_inverse=True)
    labels = np.full(flat.size, -1, dtype=np.int64)
    labels[where] = compact
    return labels.reshape(mask.shape), len(roots)


def kept_regions(values: np.ndarray, threshold: float, peak: float | None
                 ) -> tuple[np.ndarray, int]:
    """The regions of `values > threshold` that reach `peak` (all of them without one):
    a label per element (-1 elsewhere) and the count."""
    import numpy as np

    labels, count = components(values > threshold)
    if peak is None or count == 0:
        return labels, count
    inside = labels >= 0
    peaks = np.full(count, -np.inf)
    np.maximum.at(peaks, labels[inside], values[inside])
    keep = peaks >= peak
    renumber = np.where(keep, np.cumsum(keep) - 1, -1)
    kept = np.where(inside, renumber[np.where(inside, labels, 0)], -1)
    return kept, int(keep.sum())


def region_metrics(got: np.ndarray, ref: np.ndarray, threshold: float,
                   peak: float | None) -> tuple[dict[str, float], dict[str, Any]]:
    """Recall of FP32's kept regions and the IoU of the kept regions, per sample (its
    values connected along every axis of the sample), with what explains them."""
    import numpy as np

    found = regions = extra = 0
    ious: list[tuple[float, int]] = []
    for sample, (ours, theirs) in enumerate(zip(got, ref, strict=True)):
        ours_l, ours_n = kept_regions(ours, threshold, peak)
        theirs_l, theirs_n = kept_regions(theirs, threshold, peak)
        ours_m, theirs_m = ours_l >= 0, theirs_l >= 0
        regions += theirs_n
        if theirs_n:
            size = np.bincount(theirs_l[theirs_m], minlength=theirs_n)
            covered = np.bincount(theirs_l[theirs_m & ours_m], minlength=theirs_n)
            found += int(np.sum(covered >= FOUND * size))
        if ours_n:
            size = np.bincount(ours_l[ours_m], minlength=ours_n)
            covered = np.bincount(ours_l[ours_m & theirs_m], minlength=ours_n)
            extra += int(np.sum(covered < FOUND * size))
        union = int(np.sum(ours_m | theirs_m))
        if union:
            ious.append((float(np.sum(ours_m & theirs_m)) / union, sample))
    metrics: dict[str, float] = {"regions": float(regions), "regions_found": float(found),
                                 "extra_regions": float(extra),
                                 "peak": float(got.max()) if got.size else 0.0,
                                 "reference_peak": float(ref.max()) if ref.size else 0.0}
    if regions:
        metrics["region_recall"] = 100.0 * found / regions
    if ious:
        metrics["region_iou"] = 100.0 * float(np.mean([i for i, _ in ious]))
    worst = sorted(ious)[:WORST_KEPT]
    details = {"regions": {"threshold": threshold, "peak_threshold": peak,
                           "worst_iou": [{"sample": s, "iou": round(100 * i, 2)}
                                         for i, s in worst]}}
    return metrics, details
