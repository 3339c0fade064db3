"""Fidelity gates that cannot be fooled: a slice of an output, per-channel metrics, the
refusal of a whole-output cosine blind to part of it, NaN-safety, decided agreement.

Every figure asserted here is either exact (a zeroed block's cosine is 0, an argmax)
or far from its limit, so no CPU's summation order can move it across one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from edgebuild.fidelity import verdict
from edgebuild.fidelity.metrics import value_metrics
from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.recipe.models import AccuracyGate, Gates, OutputSlice


def head(samples: int = 6, classes: int = 3, anchors: int = 50) -> np.ndarray:
    """A [1, 4+C, N] head per sample: box pixels 20–300, sigmoid scores 0.05–0.9."""
    rng = np.random.default_rng(0)
    boxes = rng.uniform(20, 300, (samples, 4, anchors))
    scores = rng.uniform(0.05, 0.9, (samples, classes, anchors))
    return np.concatenate([boxes, scores], axis=1).astype(np.float32)


def save(path: Path, values: np.ndarray, name: str = "output0") -> Path:
    np.savez(path, **{f"output:{name}": values})  # type: ignore[arg-type]
    return path


def judge(tmp_path: Path, got: np.ndarray, ref: np.ndarray, **gate: Any) -> Any:
    gate.setdefault("dataset", "photos")
    return verdict.judge(AccuracyGate(**gate),
                         save(tmp_path / "got.npz", got), save(tmp_path / "ref.npz", ref))


def gate_result(tmp_path: Path, got: np.ndarray, ref: np.ndarray, **gate: Any) -> GateResult:
    """The judgement as the gate reports it (what the reports render)."""
    return GateResult.judged("host-cpu", "accuracy", judge(tmp_path, got, ref, **gate))


def zeroed_scores(values: np.ndarray) -> np.ndarray:
    broken = values.copy()
    broken[:, 4:] = 0
    return broken


def test_the_motivating_case_raw_cosine_passes_a_detector_without_scores() -> None:
    ref = head()
    raw = value_metrics(zeroed_scores(ref), ref)["cosine"]
    assert raw > 0.995  # what `min_cosine: 0.995` used to pass (issue 31 saw 0.9968)


def test_a_whole_output_cosine_blind_to_the_scores_is_refused(tmp_path: Path) -> None:
    ref = head()
    result = judge(tmp_path, zeroed_scores(ref), ref, task="regression", min_cosine=0.995)
    assert not result.passed
    assert "mixes ranges along axis 1 (channels 4–6" in result.message
    assert "slice: {axis: 1" in result.message and "channel_axis: 1" in result.message
    assert result.details["blind"]["channels"] == "4–6"
    # Refused even for a faithful build: the gate could not have seen a broken one.
    assert not judge(tmp_path, ref, ref, task="regression", min_cosine=0.995)
    # Knowingly kept whole: the old figure, and it passes the destroyed head.
    assert judge(tmp_path, zeroed_scores(ref), ref, task="regression", min_cosine=0.995,
                 channel_axis="whole")


def test_a_slice_gates_the_score_block_on_its_own(tmp_path: Path) -> None:
    ref = head()
    scores = {"output": "output0", "slice": {"axis": 1, "start": 4}, "task": "regression",
              "min_cosine": 0.995}
    broken = judge(tmp_path, zeroed_scores(ref), ref, **scores)
    assert not broken and broken.measured["cosine"] == 0.0
    assert "(output 'output0[:, 4:]')" in broken.message
    assert judge(tmp_path, ref, ref, **scores)
    boxes = judge(tmp_path, zeroed_scores(ref), ref, output="output0", task="regression",
                  slice={"axis": 1, "stop": 4}, max_relative_error=1e-6)
    assert boxes and boxes.measured["relative_error"] == 0.0  # the boxes are intact


def test_per_channel_metrics_gate_the_worst_channel(tmp_path: Path) -> None:
    ref = head()
    broken = ref.copy()
    broken[:, 5] = 0  # one class destroyed
    result = judge(tmp_path, broken, ref, task="regression", min_cosine=0.995,
                   max_relative_error=0.01, channel_axis=1)
    assert not result
    assert result.measured["cosine"] == 0.0 and result.measured["relative_error"] == 1.0
    assert result.measured["whole_cosine"] > 0.995
    assert result.details["worst_channel"]["cosine"]["channel"] == 5
    assert "worst channel 5 of axis 1" in result.message
    assert judge(tmp_path, ref * np.float32(1.0001), ref, task="regression",
                 min_cosine=0.995, channel_axis=1)


def test_per_channel_needs_values_per_channel(tmp_path: Path) -> None:
    logits = np.eye(4, dtype=np.float32)
    result = judge(tmp_path, logits, logits, min_cosine=0.9, channel_axis=1)
    assert not result and "leaves one value per sample in each channel" in result.message


def test_ordinary_outputs_are_not_refused(tmp_path: Path) -> None:
    """Logits and embeddings (one vector a sample) and a head of similar ranges keep the
    whole-output cosine."""
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 3, (8, 1000)).astype(np.float32)
    assert judge(tmp_path, logits, logits, min_cosine=0.999, min_top1_agreement=99)
    boxes = rng.uniform(0, 320, (8, 100, 4)).astype(np.float32)
    assert judge(tmp_path, boxes, boxes, task="regression", min_cosine=0.999)
    # Only the scaled metrics are blind; an absolute limit is in the output's own units.
    ref = head()
    assert not judge(tmp_path, zeroed_scores(ref), ref, task="regression", max_abs_error=0.01)


@pytest.mark.parametrize("where", ["got", "ref"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_value_fails_every_limit(tmp_path: Path, where: str, bad: float) -> None:
    ref = np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 0.5], [1.0, 0.0, 4.0]], np.float32)
    got = ref.copy()
    (got if where == "got" else ref)[1, 2] = bad
    result = judge(tmp_path, got, ref, min_top1_agreement=0, min_cosine=-1,
                   max_abs_error=1e9)
    assert not result.passed
    whose = "the build's output" if where == "got" else "the FP32 reference"
    assert f"{whose} holds 1 non-finite value(s)" in result.message
    assert "(first: 1)" in result.message
    assert all(np.isfinite(v) for v in result.measured.values())  # JSON-safe figures
    assert result.measured["non_finite_values"] == 1


def test_non_finite_gates_render(tmp_path: Path) -> None:
    from edgebuild.report.html import _gate_table
    from edgebuild.report.render import flips_section

    ref = np.eye(3, dtype=np.float32)
    got = ref.copy()
    got[0, 0] = np.nan
    result = gate_result(tmp_path, got, ref, min_cosine=0.9)
    assert result.status is GateStatus.FAILED and result.counts_as_failure
    assert result.message.startswith("on 3 samples of 'photos': the build's output holds")
    assert "non-finite" in _gate_table([result])
    assert flips_section([result]) == []


def margins_case() -> tuple[np.ndarray, np.ndarray]:
    """Four samples with FP32 top-1 − top-2 gaps of 0.01, 0.5, 1 and 3 logits."""
    ref = np.zeros((4, 5), np.float32)
    for i, gap in enumerate((0.01, 0.5, 1.0, 3.0)):
        ref[i, i] = 5.0
        ref[i, 4] = 5.0 - gap
    return ref, ref.copy()


def test_a_flip_on_a_near_tie_does_not_count(tmp_path: Path) -> None:
    ref, got = margins_case()
    got[0, [0, 4]] = got[0, [4, 0]]  # the 0.01 near-tie flips
    gate = {"min_decided_agreement": 99, "margin": 0.2, "min_top1_agreement": 70}
    result = judge(tmp_path, got, ref, **gate)
    assert result, result.message
    assert result.measured["top1_agreement"] == 75.0  # plain agreement, beside it
    assert result.measured["decided_agreement"] == 100.0
    assert result.measured["decided_samples"] == 3
    assert "3 of 4 decided at margin 0.2" in result.message
    assert "1 flip(s) at FP32 margin 0.01" in result.message
    assert result.details["flips"] == [{"sample": 0, "fp32_margin": pytest.approx(0.01),
                                        "fp32_class": 0, "class": 4, "decided": False}]


def test_a_decided_flip_fails_and_flips_are_listed_by_margin(tmp_path: Path) -> None:
    ref, got = margins_case()
    for i in (0, 3):
        got[i, [i, 4]] = got[i, [4, i]]
    result = judge(tmp_path, got, ref, min_decided_agreement=99, margin=0.2)
    assert not result
    assert result.measured["decided_agreement"] == pytest.approx(200 / 3)
    assert [f["sample"] for f in result.details["flips"]] == [3, 0]  # most decided first
    assert "decided_agreement 66.67 < 99" in result.message
    nothing = judge(tmp_path, got, ref, min_decided_agreement=99, margin=10)
    assert not nothing and "nothing decided to agree on" in nothing.message


def test_flips_render_in_both_reports(tmp_path: Path) -> None:
    from edgebuild.report.html import flips_table
    from edgebuild.report.render import flips_section

    ref, got = margins_case()
    got[3, [3, 4]] = got[3, [4, 3]]
    result = gate_result(tmp_path, got, ref, min_decided_agreement=99, margin=0.2)
    text = "\n".join(flips_section([result]))
    assert "| 3 | 3 | 3 | 4 | yes |" in text
    assert "<td>3</td>" in flips_table(result)


@pytest.mark.parametrize("gate,match", [
    ({"slice": {"axis": 0, "start": 4}, "output": "y", "min_cosine": 0.9}, "axis 0 is the batch"),
    ({"slice": {"axis": 1, "start": 4}, "min_cosine": 0.9}, "name the output a slice is of"),
    ({"slice": {"axis": 1}, "output": "y", "min_cosine": 0.9}, "keeps everything"),
    ({"slice": {"axis": 1, "start": 4, "stop": 2}, "output": "y", "min_cosine": 0.9},
     "the slice is empty"),
    ({"slice": {"axis": 1, "begin": 4}, "output": "y", "min_cosine": 0.9}, "begin"),
    ({"margin": 0.2, "min_top1_agreement": 99}, "go together"),
    ({"min_decided_agreement": 99}, "go together"),
    ({"min_decided_agreement": 0.99, "margin": 0.2}, "looks like a fraction"),
    ({"channel_axis": 1, "min_top1_agreement": 99}, "sets none of them"),
    ({"channel_axis": 0, "min_cosine": 0.9}, "channel_axis 0 is the batch"),
    ({"task": "regression", "min_decided_agreement": 99, "margin": 1},
     "mean nothing for a regression output"),
    ({"task": "detection", "boxes": "b", "scores": "s", "min_map50": 90,
      "slice": {"axis": 1, "start": 4}}, "slice"),
])
def test_schema_errors(gate: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        AccuracyGate(dataset="d", **gate)


def test_two_slices_of_one_output_are_two_gates() -> None:
    boxes = AccuracyGate(dataset="d", output="y", slice=OutputSlice(axis=1, stop=4),
                         task="regression", max_relative_error=0.01)
    scores = AccuracyGate(dataset="d", output="y", slice=OutputSlice(axis=-2, start=4),
                          task="regression", min_cosine=0.99)
    assert Gates(accuracy=[boxes, scores]).accuracy_gates == [boxes, scores]
    assert boxes.part_label == "[:, :4]" and scores.part_label == "[..., 4:, :]"
    with pytest.raises(ValidationError, match="same output on the same dataset"):
        Gates(accuracy=[boxes, boxes])


def test_a_slice_outside_the_output_fails_with_its_shape(tmp_path: Path) -> None:
    logits = np.eye(3, dtype=np.float32)
    result = judge(tmp_path, logits, logits, output="output0", min_cosine=0.9,
                   slice={"axis": 2, "start": 1})
    assert not result and "slice axis 2 is not an axis of the output, shaped [1, 3]" \
        in result.message
