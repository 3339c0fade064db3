"""The per-op profiles of the two device backends (issue 32): QNN's own profile CSV on the
HTP emulator (backends/qnn/profile.py), read as onnxruntime-qnn writes it, never shown as
phone time; Core ML's compute plan off a Mac (backends/coreml/plan.py) is "not measurable
here"."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from edgebuild.backends.qnn.profile import from_runs, onnx_node, read_csv
from edgebuild.core.artifact import Artifact
from edgebuild.execute.result import ExecutionResult, Outcome, StageRun
from edgebuild.gates.evaluate import evaluate_target
from edgebuild.gates.result import GateStatus
from edgebuild.measure.record import LatencyRecord
from edgebuild.plan.planner import TargetStages
from edgebuild.plan.stage import Stage
from edgebuild.recipe.models import Gates, Policy
from edgebuild.report.html import html_page
from edgebuild.report.model import Report, TargetReport
from edgebuild.report.render import markdown
from edgebuild.run.records import target_records

# Recorded: onnxruntime-qnn 2.7.0 (onnxruntime 1.32.0), HTP emulator on x86-64, provider
# options profiling_level=detailed, profiling_file_path=…csv; three runs of a
# Conv-Relu-Conv-Sigmoid model (1×3×16×16, fp16 on HTP v73, SoC 43). Unedited.
CSV = Path(__file__).parent / "fixtures" / "qnn_profile_detailed.csv"
NODES = {"conv_a": "Conv", "relu_a": "Relu", "conv_b": "Conv", "sig_b": "Sigmoid"}
EVIL = "<script>alert(1)</script>|`x`](http://e)"


def test_qnn_csv_runs_and_their_cycles() -> None:
    runs = read_csv(CSV.read_text())
    assert len(runs) == 3  # the finalize's events are not a run
    for run in runs:
        assert [name for name, _ in run.ops] == [
            "Input", "Transpose", "conv_a_token_1", "relu_a", "conv_b_token_5", "sig_b",
            "Transpose_token_8", "Output"]
        # QNN's own total: the per-op cycles add up to the accelerator's, exactly.
        assert sum(c for _, c in run.ops) == run.cycles
        assert run.accelerator_us is not None and run.execute_us is not None


def test_qnn_ops_are_named_back_to_the_onnx_nodes() -> None:
    profile = from_runs(read_csv(CSV.read_text()), 2, NODES)  # the last two runs
    assert profile.runs == 2 and "not phone time" in (profile.source or "")
    rows = {row.node: row for row in profile.rows}
    assert rows["relu_a"].onnx_nodes == ["relu_a"] and rows["relu_a"].op_type == "Relu"
    # The EP's `<node>_token_<n>`: an op it made for that node (here the Conv, whose
    # cycles the HTP reports at the Relu it fused with: 0).
    assert rows["conv_a_token_1"].onnx_nodes == ["conv_a"]
    assert rows["conv_a_token_1"].op_type == "Conv" and rows["conv_a_token_1"].cycles == 0
    for added in ("Transpose", "Transpose_token_8", "Input", "Output"):
        assert rows[added].onnx_nodes is None  # the EP's own ops: no ONNX node
    assert rows["Transpose_token_8"].op_type == "Transpose"
    assert rows["sig_b"].cycles == round((113358 + 117402) / 2)
    assert profile.cycles == round((404158 + 408566) / 2)
    assert sum(row.share for row in profile.rows) == pytest.approx(1.0)
    assert sum(row.cycles or 0 for row in profile.rows) == pytest.approx(profile.cycles, abs=8)
    assert profile.ops_ms == pytest.approx((39023 + 43031) / 2 / 1000)
    assert profile.runtime_ms == pytest.approx((39133 + 43118) / 2 / 1000)


def test_a_qnn_op_name_from_the_model_stays_a_plain_string() -> None:
    line = f"0,NODE,70,CYCLES,BACKEND,SUB-EVENT,{EVIL},b:OpId_9 (cycles)"
    text = ("Msg Timestamp,Message,Time,Unit of Measurement,Timing Source,Event Level,"
            "Event Identifier\n0,BACKEND,100,CYCLES,BACKEND,ROOT,Accelerator (execute) time "
            f"(cycles)\n{line}\n0,NODE,30,CYCLES,BACKEND,SUB-EVENT,Output OpId_3 (cycles)\n"
            "0,BACKEND,50,US,BACKEND,ROOT,Accelerator (execute) time\n"
            "0,EXECUTE,60,US,BACKEND,ROOT,QNN (execute) time\n")
    profile = from_runs(read_csv(text), 1, {f"{EVIL},b": "Conv"})
    assert profile.rows[0].node == f"{EVIL},b" and profile.rows[0].onnx_nodes == [f"{EVIL},b"]
    assert onnx_node("unknown_op", {}) == (None, "?")
    target = TargetReport(name="snapdragon", profile="snapdragon", backend="qnn",
                          op_profile=profile)
    report = _report(target)
    page, text = html_page(report), markdown(report)
    assert "<script>" not in page and "<script>" not in text and "](http" not in text
    assert "not phone time" in page and "HTP cycles a run" in text


def _report(target: TargetReport) -> Report:
    return Report(recipe="r", recipe_file="r.yaml", edgebuild_version="0", started="now",
                  seconds=1.0, exit_code=0, stages=[], targets=[target], counts={})


def test_latency_stays_unmeasurable_beside_the_emulator_profile() -> None:
    profile = from_runs(read_csv(CSV.read_text()), 3, NODES)
    record = LatencyRecord(unmeasurable="not measurable here: no Snapdragon device attached",
                           where="per-op profile only", profile=profile,
                           untrusted="not cached: no phone")
    stage = Stage(id="measure-latency@t", op="measure-latency", params_json="{}",
                  target="t", measures=True)
    artifact = Artifact("k" * 64, "latency", Path(), {"latency.json": "d"}, {},
                        record.to_json())
    execution = ExecutionResult({stage.id: StageRun(stage, Outcome.BUILT, artifact=artifact)})
    gates = Gates.model_validate({"latency": {"budget_ms": 5}})
    records = target_records(TargetStages(compiled="c", latency=stage.id), execution)
    (result,) = evaluate_target("t", gates, records, Policy())
    assert result.status is GateStatus.UNMEASURABLE and "no Snapdragon" in result.message
    assert artifact.untrusted  # never cached: a phone may be attached next run


def test_the_qnn_probe_leaves_a_profiling_latency_stage_to_run() -> None:
    from edgebuild.core.target import Target
    from edgebuild.recipe.profiles import load_profiles, profile_dirs
    from edgebuild.registry import load_backend

    root = Path(__file__).parents[2]
    loaded = load_profiles(profile_dirs(root / "recipe.yaml"))["snapdragon"].profile
    backend = load_backend("qnn")
    plain = Target(name="s", profile=loaded)
    asked = Target(name="s", profile=loaded.model_copy(update={
        "measure": loaded.measure.model_copy(update={"profile": True})}))
    if backend.probe(plain, "latency") is None:
        pytest.skip("a phone is attached: the probe cannot tell the two apart")
    assert backend.probe(asked, "latency") is None


# Core ML's compute plan as coremltools' classes hold it: tests/integration/coreml/
# test_compute_plan.py (importing coremltools takes seconds).


@pytest.mark.skipif(platform.system() == "Darwin", reason="on macOS the plan is real")
def test_off_a_mac_the_compute_plan_is_not_measurable_here() -> None:
    from edgebuild.backends.coreml.plan import UNMEASURABLE, compute_plan

    # No coremltools import off a Mac: the answer comes first.
    found = compute_plan(Path("model.mlpackage"), "all")
    assert found.unmeasurable == UNMEASURABLE and not found.rows
    # The iPhone target asking for a profile: its latency stage runs (the probe leaves
    # it) and records why there is none, beside "latency: not measurable here".
    from edgebuild.core.target import Target
    from edgebuild.recipe.profiles import load_profiles, profile_dirs
    from edgebuild.registry import load_backend

    root = Path(__file__).parents[2]
    loaded = load_profiles(profile_dirs(root / "recipe.yaml"))["iphone"].profile
    asked = Target(name="i", profile=loaded.model_copy(update={
        "measure": loaded.measure.model_copy(update={"profile": True})}))
    backend = load_backend("coreml")
    assert backend.probe(Target(name="i", profile=loaded), "latency")  # needs macOS
    assert backend.probe(asked, "latency") is None
    artifact = Artifact("k" * 64, "mlpackage", Path("out"), {"model.mlpackage": "d"}, {},
                        {"main": "model.mlpackage"})
    profile = backend.op_profile(artifact, asked, None, {}, {}, 5)
    assert profile is not None and profile.unmeasurable == UNMEASURABLE
