"""The fidelity budget on a real CNN with real Fashion-MNIST data: it stops at the first
configuration passing the gate, records what it tried and why, and fails honestly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgebuild.core.artifact import Artifact
from edgebuild.errors import StageError
from edgebuild.passes.quantize import Quantize, QuantizeParams
from tests.integration.passes.conftest import context

pytestmark = pytest.mark.slow
pytest.importorskip("onnxruntime")


def budgeted(tmp_path: Path, model: Artifact, gate: dict[str, Any],
             **budget: Any) -> tuple[Path, dict[str, Any]]:
    ctx = context(tmp_path / "q", {"model": model})
    params = QuantizeParams(mode="static", calibration="calib", per_channel=False,
                            calibration_samples=64, compare_samples=0,
                            budget={"gate": {"dataset": "test", **gate}, **budget})
    result = Quantize().run(ctx, params)
    return tmp_path / "q" / result.main, result.metadata["budget"]


def rejudged(tmp_path: Path, model: Path, source: Path, gate: dict[str, Any]) -> bool:
    """The written model, judged again from scratch by the gate's own verdict."""
    from edgebuild.passes.quantize import BudgetGate
    from edgebuild.passes.quantize_budget import Judge

    folder = tmp_path / "rejudge"
    folder.mkdir()
    judge = Judge(BudgetGate(dataset="test", **gate), source,
                  context(tmp_path / "eval").dataset("test"), folder)
    return judge(model).passed


def test_a_gate_the_params_as_written_pass_takes_one_trial(
        tmp_path: Path, fashion_onnx: Artifact) -> None:
    gate = {"min_top1_agreement": 80, "min_cosine": 0.9}
    model, record = budgeted(tmp_path, fashion_onnx, gate)
    assert [t["step"] for t in record["trials"]] == ["as written"]
    assert record["chosen"] == "as written" and record["params"] == {}
    assert record["config"] == "minmax, per-tensor"
    assert record["headroom"] > 0 and record["samples"] == 1000
    assert rejudged(tmp_path, model, fashion_onnx.main, gate)


def test_the_ladder_stops_at_the_first_passing_step_and_says_why(
        tmp_path: Path, fashion_onnx: Artifact) -> None:
    """A cosine no INT8 build of the whole CNN reaches: every free lever is tried, each
    recorded with its headroom and whether it was kept, and keeping the fewest most
    sensitive layers in float passes."""
    gate = {"min_top1_agreement": 99, "min_cosine": 0.99999}
    model, record = budgeted(tmp_path, fashion_onnx, gate)
    trials = record["trials"]
    names = [t["step"] for t in trials]
    assert names[0] == "as written" and names[-1] == record["chosen"]
    order = ["as written", "percentile", "entropy", "reduce_range", "bias_correction",
             "equalize", "keep float"]
    assert names == [n for n in order if n in names], "tried cheapest first, in order"
    assert all(not t["passed"] for t in trials[:-1]) and trials[-1]["passed"]
    for trial in trials:
        assert trial["why"] and "cosine" in trial["metrics"] and "config" in trial
        if not trial["passed"]:
            assert "cosine" in trial["failed"]
    assert trials[0]["kept"], "the first configuration is the baseline"
    if record["chosen"] == "keep float":
        search = trials[-1]["keep_float"]
        assert search["steps"][-1]["passed"] or any(s["passed"] for s in search["steps"])
        assert record["params"]["exclude_nodes"], "the layers kept float are named"
    assert rejudged(tmp_path, model, fashion_onnx.main, gate)


def test_no_passing_configuration_is_a_failure_that_names_the_closest(
        tmp_path: Path, fashion_onnx: Artifact) -> None:
    """max_abs_error 0 is out of reach of any INT8 model: the stage fails, naming every
    configuration tried and the closest one, and writes no model."""
    with pytest.raises(StageError, match="no INT8 configuration passed") as info:
        budgeted(tmp_path, fashion_onnx, {"max_abs_error": 0.0},
                 steps=["percentile", "bias_correction"])
    message = info.value.message
    assert "closest:" in message and "Tried: as written:" in message
    assert "percentile:" in message and "bias_correction:" in message
    assert "max_abs_error" in message
    assert "keep_float" in info.value.hint


def test_keep_float_out_of_iterations_is_a_failure_too(
        tmp_path: Path, fashion_onnx: Artifact) -> None:
    with pytest.raises(StageError, match="no INT8 configuration passed") as info:
        budgeted(tmp_path, fashion_onnx, {"max_abs_error": 0.0}, steps=["keep_float"],
                 max_iterations=2)
    assert "keep float:" in info.value.message
