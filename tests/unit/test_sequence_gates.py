"""Metrics that fit the output (issue 30): per-position agreement, CTC text, thresholded
decisions, the range check, and the refusal to flatten positions and classes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from edgebuild.fidelity import verdict
from edgebuild.fidelity.sequence import ctc_decode, edit_distance, out_of_range
from edgebuild.recipe.models import AccuracyGate


def one_hot(steps: list[int], classes: int = 5) -> np.ndarray:
    """(T, C) scores whose argmax per step is `steps`, with a clear lead."""
    scores = np.full((len(steps), classes), 0.01)
    scores[np.arange(len(steps)), steps] = 0.9
    return scores


def test_ctc_greedy_decoding_collapses_repeats_and_drops_blanks() -> None:
    scores = one_hot([0, 1, 1, 0, 1, 2, 2, 0, 0, 3])[None]
    assert ctc_decode(scores, blank=0) == [[1, 1, 2, 3]]
    assert edit_distance([1, 2, 3], [1, 3]) == 1
    assert edit_distance([], [4, 4]) == 2
    assert edit_distance([1, 2], [2, 1]) == 2


def save(path: Path, values: np.ndarray, labels: np.ndarray | None = None) -> Path:
    arrays: dict[str, Any] = {"output:out": values}
    if labels is not None:
        arrays["labels"] = labels
    np.savez(path, **arrays)
    return path


def judge(tmp_path: Path, got: np.ndarray, ref: np.ndarray, **gate: Any) -> Any:
    return verdict.judge(AccuracyGate(dataset="d", output="out", **gate),
                         save(tmp_path / "got.npz", got), save(tmp_path / "ref.npz", ref))


def sequences() -> tuple[np.ndarray, np.ndarray]:
    """Four samples of [T=10, C=5]; the build drops one character of sample 2."""
    ref = np.stack([one_hot([0, 1, 1, 0, 2, 0, 3, 3, 0, 4]) for _ in range(4)])
    got = ref.copy()
    got[2, 4] = one_hot([0])[0]  # the `2` of sample 2 becomes a blank
    return got, ref


def test_ctc_gate_reads_the_decoded_text(tmp_path: Path) -> None:
    got, ref = sequences()
    result = judge(tmp_path, got, ref, task="ctc", min_sequence_match=100)
    assert not result and result.measured["sequence_match"] == 75.0
    # One edit over 4 × 4 FP32 characters: CER 6.25 %.
    assert result.measured["cer"] == pytest.approx(6.25)
    assert result.details["differing_sequences"][0]["sample"] == 2
    assert judge(tmp_path, got, ref, task="ctc", max_cer=7)


def test_per_position_agreement_and_no_silent_flattening(tmp_path: Path) -> None:
    got, ref = sequences()
    per_position = judge(tmp_path, got, ref, class_axis=-1, min_top1_agreement=97)
    assert per_position and per_position.measured["top1_agreement"] == 97.5  # 39 of 40
    assert per_position.measured["positions"] == 10
    flattened = judge(tmp_path, got, ref, min_top1_agreement=99)
    assert not flattened and "declare the class axis" in flattened.message


def test_decision_agreement_on_a_threshold(tmp_path: Path) -> None:
    ref = np.array([[0.1], [0.45], [0.55], [0.9]])
    got = np.array([[0.2], [0.52], [0.56], [0.8]])  # one decision flips (0.45 -> 0.52)
    result = judge(tmp_path, got, ref, task="regression", min_decision_agreement=100,
                   threshold=0.5)
    assert not result and result.measured["decision_agreement"] == 75.0
    with pytest.raises(ValidationError, match="needs `threshold:`"):
        AccuracyGate(dataset="d", task="regression", min_decision_agreement=99)


def test_an_output_outside_fp32s_range_fails_every_limit_by_name(tmp_path: Path) -> None:
    ref = np.linspace(0.01, 0.99, 40).reshape(4, 10)
    got = ref.copy()
    got[1, 3] = -98304.0  # what the QNN fp16 build returned for a sigmoid
    left = out_of_range(got, ref, 0.5)
    assert left is not None and left["values"] == 1 and left["worst"][0]["sample"] == 1
    # A decision gate cannot see it (the value was below the threshold in FP32 too)...
    decisions = {"task": "regression", "min_decision_agreement": 100, "threshold": 0.5}
    assert judge(tmp_path, got, ref, range_tolerance=None, **decisions)
    # ...the range check can, whatever the limits.
    result = judge(tmp_path, got, ref, **decisions)
    assert not result and "leaves the range FP32's spans" in result.message
    assert "-98304 (sample 1)" in result.message
    # Quiet for values that stay near FP32's span.
    assert out_of_range(np.clip(ref + 0.05, 0, 1), ref, 0.5) is None


def test_sequence_keys_need_their_task() -> None:
    with pytest.raises(ValidationError, match="task: ctc"):
        AccuracyGate(dataset="d", min_sequence_match=90)
    with pytest.raises(ValidationError, match="class_axis 0 is the batch"):
        AccuracyGate(dataset="d", class_axis=0, min_top1_agreement=99)
    with pytest.raises(ValidationError, match="class scores"):
        AccuracyGate(dataset="d", task="regression", class_axis=-1, min_cosine=0.9)
