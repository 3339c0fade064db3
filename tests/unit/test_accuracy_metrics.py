"""The accuracy metrics computed from stored outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgebuild.gates.accuracy import accuracy_metrics


def save(path: Path, outputs: np.ndarray, labels: np.ndarray | None = None) -> Path:
    arrays = {"output:logits": outputs}
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
    assert m["top5"] == 100.0  # 4 classes: every label is in the top 5


def test_shape_mismatch_is_an_error(tmp_path: Path) -> None:
    ref = save(tmp_path / "ref.npz", np.zeros((2, 3), np.float32))
    got = save(tmp_path / "got.npz", np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="differs from the reference"):
        accuracy_metrics(got, ref)
