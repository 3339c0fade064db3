"""The positive region of a sparse binary map (issue 40, item 3): connected regions, the
peak a region must reach, recall and IoU, their validation, and the refusal of agreement
a constant build would meet. Every figure here is exact (counts of pixels and regions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from edgebuild.fidelity import verdict
from edgebuild.fidelity.regions import components, kept_regions, region_metrics
from edgebuild.recipe.models import AccuracyGate


def judge(tmp_path: Path, got: np.ndarray, ref: np.ndarray, **gate: Any) -> Any:
    for name, values in (("got", got), ("ref", ref)):
        np.savez(tmp_path / f"{name}.npz", **{"output:map": values})  # type: ignore[arg-type]
    return verdict.judge(AccuracyGate(
        dataset="pages", output="map", task="dense", **gate),
        tmp_path / "got.npz", tmp_path / "ref.npz")


def page(words: list[tuple[int, int, float]], size: int = 40) -> np.ndarray:
    """A [1, size, size] map at 0.05 with a 4×6 block of `value` at each (row, column)."""
    found = np.full((1, size, size), 0.05)
    for y, x, value in words:
        found[0, y:y + 4, x:x + 6] = value
    return found


def test_regions_connect_through_faces_not_corners() -> None:
    mask = np.array([[1, 1, 0, 0],
                     [0, 1, 0, 1],
                     [0, 0, 1, 1],
                     [1, 0, 0, 0]], bool)
    labels, count = components(mask)
    assert count == 3  # the corner between (1, 1) and (2, 2) does not join them
    assert labels[0, 0] == labels[1, 1] != labels[2, 2] == labels[1, 3]
    assert (labels[~mask] == -1).all()
    assert components(np.zeros((3, 3), bool))[1] == 0
    serpent = np.zeros((41, 41), bool)  # one region 861 pixels long, end to end
    serpent[::2] = True
    serpent[1::4, -1] = serpent[3::4, 0] = True
    assert components(serpent)[1] == 1


def test_a_region_counts_only_where_it_reaches_the_peak() -> None:
    values = page([(2, 2, 0.9), (20, 20, 0.6)])[0]
    assert kept_regions(values, 0.4, None)[1] == 2
    labels, count = kept_regions(values, 0.4, 0.7)
    assert count == 1 and labels[3, 3] == 0 and labels[21, 21] == -1


def test_recall_and_iou_of_the_regions(tmp_path: Path) -> None:
    ref = np.stack([page([(2, 2, 0.9), (20, 20, 0.9)]), page([(10, 10, 0.9)])])
    half = np.stack([page([(2, 2, 0.9)]), page([(10, 10, 0.9)])])  # one word lost
    metrics, details = region_metrics(half, ref, 0.4, 0.7)
    assert metrics["regions"] == 3 and metrics["regions_found"] == 2
    assert metrics["region_recall"] == pytest.approx(200 / 3)
    assert metrics["region_iou"] == pytest.approx(75.0)  # (50 % + 100 %) / 2
    assert details["regions"]["worst_iou"][0] == {"sample": 0, "iou": 50.0}
    result = judge(tmp_path, half, ref, threshold=0.4, peak_threshold=0.7,
                   min_region_recall=95, min_region_iou=80)
    assert not result and "2 of 3 FP32 region(s) found" in result.message
    assert judge(tmp_path, ref, ref, threshold=0.4, min_region_recall=100, min_region_iou=100)


def test_a_map_that_peaks_just_under_the_peak_threshold_loses_every_region(
        tmp_path: Path) -> None:
    """CRAFT's INT8 build on ONNX Runtime peaked at 0.695 where words need 0.7: its
    regions above 0.4 are all there, and not one would become a box."""
    ref = np.stack([page([(2, 2, 0.9), (20, 20, 0.85)])])
    under = np.where(ref > 0.4, 0.695, ref)
    assert judge(tmp_path, under, ref, threshold=0.4, min_region_recall=95)
    result = judge(tmp_path, under, ref, threshold=0.4, peak_threshold=0.7,
                   min_region_recall=95)
    assert not result and result.measured["region_recall"] == 0.0
    assert "the build's map peaks at 0.695" in result.message


def test_nothing_to_find_fails_the_region_gate(tmp_path: Path) -> None:
    blank = np.full((2, 1, 8, 8), 0.05)
    result = judge(tmp_path, blank, blank, threshold=0.4, min_region_recall=95,
                   min_region_iou=80)
    assert not result and "FP32 has no region above threshold 0.4" in result.message


def test_a_step_a_sample_is_a_region_each(tmp_path: Path) -> None:
    """One decision a sample (a voice-activity stream's steps): each positive step is a
    region, so recall is the share of FP32's positive steps the build keeps."""
    ref = np.array([[0.9], [0.1], [0.8], [0.1], [0.7]])
    got = np.array([[0.9], [0.1], [0.2], [0.6], [0.7]])
    metrics, _ = region_metrics(got, ref, 0.5, None)
    assert metrics["region_recall"] == pytest.approx(200 / 3)
    assert metrics["region_iou"] == pytest.approx(50.0)  # 2 of the 4 steps either marks


@pytest.mark.parametrize(("positive", "limit", "refused"), [
    (2.0, 90, True),     # rare: refused whatever the limit
    (9.0, 90, True),     # a build above the threshold nowhere agrees on 91 %
    (9.0, 99, False),    # ... which 99 fails: agreement can see the positives
    (95.0, 90, True),    # above it everywhere: 95 %
    (50.0, 99, False),
])
def test_agreement_a_constant_build_would_meet_is_refused(
        tmp_path: Path, positive: float, limit: float, refused: bool) -> None:
    ref = (np.arange(1000) < positive * 10).astype(float).reshape(10, 1, 10, 10)
    result = judge(tmp_path, ref, ref, threshold=0.5, min_decision_agreement=limit)
    assert bool(result) is not refused, result.message
    if refused:
        assert "replace `min_decision_agreement` by `min_region_recall: 95" in result.message


@pytest.mark.parametrize(("gate", "says"), [
    ({"task": "dense", "min_region_recall": 95}, "needs `threshold:`"),
    ({"task": "dense", "threshold": 0.4, "min_psnr": 30}, "`threshold:` goes with"),
    ({"threshold": 0.4, "min_region_iou": 80}, "add `task: dense`"),
    ({"task": "dense", "peak_threshold": 0.7, "min_psnr": 30},
     "goes with min_region_recall"),
    ({"task": "dense", "threshold": 0.7, "peak_threshold": 0.4, "min_region_iou": 80},
     "not above threshold 0.7"),
    ({"task": "dense", "threshold": 0.4, "min_region_recall": 0.95}, "looks like a fraction"),
])
def test_region_keys_are_checked(gate: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says.replace("`", ".")):
        AccuracyGate(dataset="pages", output="map", **gate)
