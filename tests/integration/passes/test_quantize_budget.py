"""The fidelity budget on a real CNN with real Fashion-MNIST data: it stops at the first
configuration passing the gate, records what it tried and why, and fails honestly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgebuild.core.artifact import Artifact
from edgebuild.errors import StageError
from edgebuild.passes.quantize import Quantize
from edgebuild.quant.engines.aimet import available as aimet_available
from edgebuild.quant.params import QuantizeParams
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
    from edgebuild.quant.params import BudgetGate
    from edgebuild.quant.search.budget import Judge

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
    # the closest trial shows the gated metric itself, not only the standard figures
    assert "'max_abs_error':" in message.partition("closest:")[2].partition("Tried:")[0]
    assert "keep_float" in info.value.hint
    # the trials travel with the error: the failed stage's metadata in report.json
    budget = info.value.metadata["budget"]
    assert budget["chosen"] is None and budget["closest"] in message
    assert [t["step"] for t in budget["trials"]][:2] == ["as written", "percentile"]


def test_keep_float_out_of_iterations_is_a_failure_too(
        tmp_path: Path, fashion_onnx: Artifact) -> None:
    with pytest.raises(StageError, match="no INT8 configuration passed") as info:
        budgeted(tmp_path, fashion_onnx, {"max_abs_error": 0.0}, steps=["keep_float"],
                 max_iterations=2)
    message = info.value.message
    assert "layers in float): " in message and "keep float (" in message, message
    assert "Not tried" not in message, "keep_float was tried: it is not listed as untried"


def test_aimet_steps_are_skipped_with_the_reason_when_aimet_is_absent(
        tmp_path: Path, fashion_onnx: Artifact, monkeypatch: pytest.MonkeyPatch) -> None:
    from edgebuild.quant.engines import aimet

    monkeypatch.setattr(aimet, "available", lambda: False)
    with pytest.raises(StageError, match="no INT8 configuration passed") as info:
        budgeted(tmp_path, fashion_onnx, {"max_abs_error": 0.0}, steps=["seq_mse", "adaround"])
    assert "Tried: as written:" in info.value.message
    assert "seq_mse" not in info.value.message.partition("Tried:")[2], "not tried, not untried"


aimet = pytest.mark.skipif(not aimet_available(), reason="aimet-onnx is not installed (the "
                           "optional extra edgebuild[aimet])")


@aimet
@pytest.mark.parametrize("rounding", ["nearest", "seq_mse"])
def test_aimet_engine_writes_qdq_that_onnx_runtime_runs(
        tmp_path: Path, fashion_onnx: Artifact, rounding: str) -> None:
    import onnx

    from tests.integration.passes.conftest import top1

    ctx = context(tmp_path / "q", {"model": fashion_onnx})
    params = QuantizeParams(mode="static", calibration="calib", engine="aimet",
                            weight_rounding=rounding, calibration_samples=64,
                            compare_samples=0, seq_mse_candidates=10)
    result = Quantize().run(ctx, params)
    path = tmp_path / "q" / result.main
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops
    assert "QcQuantizeOp" not in ops, "AIMET's simulation op never reaches the artifact"
    evaluation = context(tmp_path / "eval")
    # Within 5 points of FP32's 92 % on ONNX Runtime's integer kernels (they saturate on a
    # CPU without VNNI: 2–3 points for per-channel weights, AIMET's as ONNX Runtime's).
    assert top1(fashion_onnx.main, evaluation) - top1(path, evaluation) < 5.0


@aimet
def test_aimet_engine_keeps_excluded_layers_float(tmp_path: Path,
                                                  fashion_onnx: Artifact) -> None:
    import onnx

    graph = onnx.load(str(fashion_onnx.main)).graph
    conv = next(n for n in graph.node if n.op_type == "Conv")
    ctx = context(tmp_path / "q", {"model": fashion_onnx})
    result = Quantize().run(ctx, QuantizeParams(
        mode="static", calibration="calib", engine="aimet", calibration_samples=32,
        compare_samples=0, exclude_nodes=[conv.name]))
    model = onnx.load(str(tmp_path / "q" / result.main))
    weight = conv.input[1]
    producers = {o: n for n in model.graph.node for o in n.output}
    quantized = [n for n in model.graph.node if n.op_type == "Conv"
                 and n.input[1] in producers and producers[n.input[1]].op_type ==
                 "DequantizeLinear"]
    assert quantized, "the other convolutions are quantized"
    kept = next(n for n in model.graph.node if n.op_type == "Conv" and n.name == conv.name)
    assert kept.input[1] == weight, "the excluded convolution keeps its float weight"


def test_a_step_that_breaks_on_the_graph_is_skipped_with_its_error(
        tmp_path: Path, fashion_onnx: Artifact, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lever that raises on a model (equalize's interval arithmetic died on PP-OCRv4's
    Constant nodes) is a step not taken, named with its error: the search goes on."""
    from edgebuild.quant.levers import equalize

    def broken(*_: Any) -> Any:
        raise RuntimeError("no interval for this graph")

    monkeypatch.setattr(equalize, "interval_bounds", broken)
    with pytest.raises(StageError, match="no INT8 configuration passed") as info:
        budgeted(tmp_path, fashion_onnx, {"max_abs_error": 0.0},
                 steps=["equalize", "bias_correction"])
    message = info.value.message
    assert "bias_correction:" in message, "the step after the broken one ran"
    assert "equalize failed on this model (RuntimeError: no interval for this graph)" in message


def test_the_advice_names_only_what_was_not_tried_and_passes_when_applied(
        tmp_path: Path, fashion_onnx: Artifact) -> None:
    """keep_float in the steps, stopped by max_iterations: the hint says to raise it (main
    said "add `keep_float` to budget.steps", which the steps held), and doing so passes."""
    gate = {"min_top1_agreement": 99, "min_cosine": 0.99999}
    with pytest.raises(StageError, match="no INT8 configuration passed") as info:
        budgeted(tmp_path / "one", fashion_onnx, gate, steps=["keep_float"], max_iterations=1)
    hint = info.value.hint
    assert "add `keep_float`" not in hint, hint
    assert "raise budget.max_iterations (1)" in hint, hint
    model, record = budgeted(tmp_path / "eight", fashion_onnx, gate, steps=["keep_float"],
                             max_iterations=8)
    assert record["chosen"] == "keep float", record
    assert rejudged(tmp_path, model, fashion_onnx.main, gate)


def test_the_judge_lets_idle_threads_sleep_in_a_stage_that_shares_the_cpu(
        tmp_path: Path, fashion_onnx: Artifact, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget's trials time nothing: beside another build (the other test worker),
    spinning ONNX Runtime pools made the text recognizer's seven trials take 74 s instead
    of 37 (docs/performance.md, "Stages that share the CPU")."""
    import onnxruntime as ort

    from edgebuild.core.share_cpu import SHARE_CPU_ENV
    from edgebuild.quant.params import BudgetGate
    from edgebuild.quant.search.budget import Judge

    spinning: list[str] = []
    real = ort.InferenceSession

    def spy(model: Any, options: Any = None, **kwargs: Any) -> Any:
        spinning.append(options.get_session_config_entry("session.intra_op.allow_spinning"))
        return real(model, options, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", spy)
    monkeypatch.setenv(SHARE_CPU_ENV, "1")
    folder = tmp_path / "judge"
    folder.mkdir()
    judge = Judge(BudgetGate(dataset="test", min_top1_agreement=99), fashion_onnx.main,
                  context(tmp_path / "eval").dataset("test"), folder)
    assert judge(fashion_onnx.main).passed  # FP32 against itself
    assert spinning == ["0", "0"]  # the reference's session and the trial's
