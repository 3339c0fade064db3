"""CTC sequences against labels: a build's text vs the text in the data, beside FP32's, with
a recognizer's padding spaces cut (issue 30: "CER vs labels when given")."""

from __future__ import annotations

import numpy as np
import pytest

from edgebuild.fidelity.sequence import ctc_metrics, label_sequences
from edgebuild.recipe.accuracy import AccuracyGate


def scores(sequences: list[list[int]], classes: int = 5, steps: int = 8) -> np.ndarray:
    """One-hot per-step scores whose greedy decoding is each sequence (blank 0 between)."""
    out = np.zeros((len(sequences), steps, classes))
    for i, seq in enumerate(sequences):
        path = [c for s in seq for c in (s, 0)][:steps]
        path += [0] * (steps - len(path))
        out[i, np.arange(steps), path] = 1.0
    return out


def test_the_build_and_fp32_are_both_compared_with_the_labels() -> None:
    space = 4
    ref = scores([[space, 1, 2, space], [1, 3]])       # FP32: padding spaces, both right
    got = scores([[1, 2], [1, 2]])                      # the build misreads 3 as 2
    labels = np.array([[1, 2, -1], [1, 3, -1]])
    found = ctc_metrics(got, ref, -1, 0, labels, trim=(space,))
    m = found.metrics
    assert m["reference_sequence_match_labels"] == 100 and m["reference_cer_labels"] == 0
    assert m["sequence_match_labels"] == 50 and m["cer_labels"] == 25  # 1 of 4 characters
    assert found.details["misread_sequences"] == [{"sample": 1, "label": [1, 3], "build": [1, 2]}]
    untrimmed = ctc_metrics(got, ref, -1, 0, labels).metrics
    assert untrimmed["reference_cer_labels"] == 50  # the two padding spaces count


@pytest.mark.parametrize(("labels", "message"), [
    (np.array([1, 2]), "one row of class indices a sample"),
    (np.array([[1, 9]]), r"labels name classes \[9\]"),
])
def test_labels_that_cannot_be_sequences_are_named(labels: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        label_sequences(labels, 1, 5) if labels.ndim == 2 else label_sequences(labels, 2, 5)


def test_label_limits_and_trim_belong_to_ctc() -> None:
    AccuracyGate.model_validate({"dataset": "d", "task": "ctc", "max_cer_labels": 2,
                                 "trim": [4]})
    with pytest.raises(ValueError, match="add `task: ctc`"):
        AccuracyGate.model_validate({"dataset": "d", "task": "regression", "max_cer_labels": 2})
    with pytest.raises(ValueError, match="`trim:` cuts classes"):
        AccuracyGate.model_validate({"dataset": "d", "min_cosine": 0.9, "trim": [4]})
