"""The accuracy metrics computed from stored outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgebuild.fidelity.compare import accuracy_metrics


def save(path: Path, outputs: np.ndarray, labels: np.ndarray | None = None,
         **more: np.ndarray) -> Path:
    arrays = {"output:logits": outputs, **{f"output:{k}": v for k, v in more.items()}}
    if labels is not None:
        arrays["labels"] = labels
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return path


def test_identical_outputs(tmp_path: Path) -> None:
    logits = np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    ref = save(tmp_path / "ref.npz", logits, np.array([1, 2]))
    got = save(tmp_path / "got.npz", logits, np.array([1, 2]))
    m = accuracy_metrics(got, ref)
    assert m["top1_agreement"] == 100.0
    assert m["cosine"] == pytest.approx(1.0)  # the all-zero row counts as identical
    assert m["max_abs_error"] == 0.0
    assert m["top1"] == 50.0 and m["top1_drop"] == 0.0


def test_disagreement_and_drop(tmp_path: Path) -> None:
    ref = save(tmp_path / "ref.npz", np.eye(4, dtype=np.float32), np.arange(4))
    swapped = np.eye(4, dtype=np.float32)[[1, 0, 2, 3]]
    got = save(tmp_path / "got.npz", swapped, np.arange(4))
    m = accuracy_metrics(got, ref)
    assert m["top1_agreement"] == 50.0
    assert m["top1"] == 50.0 and m["reference_top1"] == 100.0 and m["top1_drop"] == 50.0
    assert m["cosine"] == pytest.approx(0.5)
    assert "top5" not in m  # 4 classes: every label is in the top 5, a meaningless 100 %


def test_shape_mismatch_is_an_error(tmp_path: Path) -> None:
    ref = save(tmp_path / "ref.npz", np.zeros((2, 3), np.float32))
    got = save(tmp_path / "got.npz", np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="differs from the reference"):
        accuracy_metrics(got, ref)


def test_blank_heat_maps_do_not_fail_the_cosine(tmp_path: Path) -> None:
    """The case seen on a text detector: blank crops, both maps ~1e-7 everywhere, max
    abs error 4e-5 — a mean cosine of 0.8 that meant nothing."""
    rng = np.random.default_rng(0)
    content = rng.random((2, 64)).astype(np.float32)
    blank_ref = rng.normal(0, 1e-7, (6, 64)).astype(np.float32)
    blank_got = rng.normal(0, 1e-7, (6, 64)).astype(np.float32)
    ref = save(tmp_path / "ref.npz", np.concatenate([content, blank_ref]))
    got = save(tmp_path / "got.npz", np.concatenate([content + 1e-5, blank_got]))
    m = accuracy_metrics(got, ref, task="dense")
    assert m["near_zero_samples"] == 6
    assert m["cosine"] > 0.9999
    assert m["relative_error"] < 1e-3  # floored denominators: the blanks cannot blow it up
    assert m["psnr"] > 60
    assert "top1_agreement" not in m  # an argmax of a heat map means nothing


def test_each_output_is_compared_on_its_own(tmp_path: Path) -> None:
    logits = np.eye(3, dtype=np.float32)
    boxes = np.array([[0, 0, 10, 10], [5, 5, 20, 20], [1, 2, 3, 4]], dtype=np.float32)
    ref = save(tmp_path / "ref.npz", logits, boxes=boxes)
    got = save(tmp_path / "got.npz", logits, boxes=boxes + 0.5)
    assert accuracy_metrics(got, ref, "logits")["max_abs_error"] == 0.0
    regression = accuracy_metrics(got, ref, "boxes", task="regression")
    assert regression["max_abs_error"] == pytest.approx(0.5)
    assert "top1" not in regression and "top1_agreement" not in regression
    with pytest.raises(ValueError, match="no output 'scores'"):
        accuracy_metrics(got, ref, "scores")


@pytest.mark.parametrize("labels,match", [
    (np.array([0, 1, 7]), "labels range over 0..7, but the output has 3 classes"),
    (np.array([0.0, 1.0, 2.0]), "not integer class indices"),
])
def test_labels_outside_the_classes_are_an_error(tmp_path: Path, labels: np.ndarray,
                                                 match: str) -> None:
    ref = save(tmp_path / "ref.npz", np.eye(3, dtype=np.float32), labels)
    got = save(tmp_path / "got.npz", np.eye(3, dtype=np.float32), labels)
    with pytest.raises(ValueError, match=match):
        accuracy_metrics(got, ref)


def test_class_limits_on_a_regression_output_are_a_recipe_error() -> None:
    from pydantic import ValidationError

    from edgebuild.recipe.models import AccuracyGate, Gates

    with pytest.raises(ValidationError, match="mean nothing for a regression output"):
        AccuracyGate(dataset="d", output="boxes", task="regression", min_top1_agreement=99)
    # Several datasets are fine (each is inferred once); one output twice on one is not.
    both = Gates(accuracy=[AccuracyGate(dataset="a", output="x", min_cosine=0.9),
                           AccuracyGate(dataset="b", output="x", min_cosine=0.9)])
    assert both.accuracy_datasets == ["a", "b"]
    with pytest.raises(ValidationError, match="same output on the same dataset"):
        Gates(accuracy=[AccuracyGate(dataset="a", output="x", min_cosine=0.9),
                        AccuracyGate(dataset="a", output="x", max_abs_error=0.1)])
