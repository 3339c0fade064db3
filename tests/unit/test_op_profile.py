"""Per-operator profiles and the memory gate (issue 32): the planner asks for them only
when a target does, the gate never passes what was not measured, the runtimes' outputs
are read as they print them, and the report escapes every name a model file wrote."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from edgebuild.backends.onnxruntime.profile import from_trace
from edgebuild.backends.openvino.profile import from_counters
from edgebuild.core.artifact import Artifact
from edgebuild.execute.result import ExecutionResult, Outcome, StageRun
from edgebuild.gates.evaluate import evaluate_target
from edgebuild.gates.result import GateStatus
from edgebuild.measure.profiled import profiled_runs, recorded
from edgebuild.measure.record import LatencyRecord, Memory, OpProfile, OpRow
from edgebuild.plan.planner import TargetStages
from edgebuild.plan.stage import Stage
from edgebuild.recipe.models import Gates, Policy
from edgebuild.report.html import html_page
from edgebuild.report.model import Report, TargetReport
from edgebuild.report.render import markdown
from edgebuild.run.records import target_records
from tests.unit.test_planner import plan_of

EVIL = "<script>alert(1)</script>|`x`](http://e)"

RECIPE = """\
name: mem
model: {factory: "m.py:build"}
inputs: [{name: x, shape: [1, 4]}]
passes: [export-onnx]
targets:
  host-cpu:
    gates: {latency: {budget_ms: 5}}
  intel-cpu:
    gates: {memory: {max_mb: 300}}
  rpi4:
    measure: {profile: true}
"""


def test_only_a_target_that_asks_measures_more(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, RECIPE)
    stages = {s.id: s for s in plan.order()}
    latency = {t: s.latency for t, s in plan.targets.items()}
    assert all(latency.values())  # a memory gate alone, or a profile alone, plans it
    params = {t: stages[str(s)].params for t, s in latency.items()}
    # No memory gate and no profile asked: the stage's params (and key) are as before.
    assert params["host-cpu"] == {} and not _asks_profile(tmp_path, "host-cpu")
    assert params["intel-cpu"] == {"memory": True}
    assert params["rpi4"] == {} and _asks_profile(tmp_path, "rpi4")


def _asks_profile(tmp_path: Path, target: str) -> bool:
    from edgebuild.recipe.loader import load_recipe

    return load_recipe(tmp_path / "r.yaml").targets[target].measure.profile


def _evaluate(metadata: dict[str, Any] | None, outcome: Outcome = Outcome.BUILT,
              message: str = "") -> Any:
    stage = Stage(id="measure-latency@t", op="measure-latency", params_json="{}",
                  target="t", measures=True)
    artifact = (Artifact("k" * 64, "latency", Path(), {"latency.json": "d"}, {}, metadata)
                if metadata is not None else None)
    execution = ExecutionResult({stage.id: StageRun(stage, outcome, artifact=artifact,
                                                    message=message)})
    gates = Gates.model_validate({"memory": {"max_mb": 100}})
    records = target_records(TargetStages(compiled="c", latency=stage.id), execution)
    results = evaluate_target("t", gates, records, Policy())
    (result,) = results
    return result


def test_memory_gate_is_judged_like_the_size_gate() -> None:
    within = _evaluate({"p50": 1.0, "memory": {"peak_mb": 42.0, "process_peak_mb": 90.0}})
    assert within.status is GateStatus.PASSED and within.measured == {"peak_mb": 42.0}
    over = _evaluate({"p50": 1.0, "memory": {"peak_mb": 142.0}})
    assert over.status is GateStatus.FAILED and "over the 100 MB limit" in over.message


@pytest.mark.parametrize("metadata", [
    {"p50": 1.0},  # measured nothing
    {"p50": 1.0, "memory": {"unmeasurable": "not measurable here: backend qnn does not …"}},
])
def test_memory_never_passes_what_was_not_measured(metadata: dict[str, Any]) -> None:
    result = _evaluate(metadata)
    assert result.status is GateStatus.UNMEASURABLE and result.counts_as_failure
    assert "not measurable here" in result.message


def test_a_stage_that_could_not_measure_is_unmeasurable() -> None:
    result = _evaluate(None, Outcome.UNMEASURABLE, "not measurable here: needs macOS")
    assert result.status is GateStatus.UNMEASURABLE and "needs macOS" in result.message


# ONNX Runtime's trace as 1.32 writes it (abridged: the args edgebuild reads).
def _node(name: str, op: str, ts: int, dur: int) -> dict[str, Any]:
    return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur, "ph": "X",
            "args": {"op_name": op, "provider": "CPUExecutionProvider"}}


def _run(ts: int, dur: int) -> dict[str, Any]:
    return {"cat": "Session", "name": "model_run", "ts": ts, "dur": dur, "ph": "X"}


TRACE = [
    {"cat": "Session", "name": "session_initialization", "ts": 10, "dur": 900},
    _node("r0_nchwc", "Conv", 1000, 500), _node("flat", "Flatten", 1500, 10),
    _run(990, 600),  # the warm-up: not counted
    _node("r0_nchwc", "Conv", 2000, 300), _node("flat", "Flatten", 2300, 20),
    _run(1990, 400),
    _node("r0_nchwc", "Conv", 3000, 100), _node("flat", "Flatten", 3100, 20),
    _run(2990, 200),
]
GRAPH = [("conv0", "Conv", ["x", "w"], ["c0"]), ("relu0", "Relu", ["c0"], ["r0"]),
         ("flat", "Flatten", ["r0"], ["y"])]


def test_ort_trace_counts_only_the_profiled_runs_and_maps_fused_nodes() -> None:
    profile = from_trace(TRACE, 2, GRAPH)
    assert profile.runs == 2
    assert profile.runtime_ms == pytest.approx(0.3)  # (400 + 200) µs / 2
    conv, flat = profile.rows
    assert (conv.node, conv.ms, flat.ms) == ("r0_nchwc", pytest.approx(0.2), pytest.approx(0.02))
    # ORT named the node after the tensor it writes: conv0 through relu0, fused.
    assert conv.onnx_nodes == ["conv0", "relu0"] and conv.fused
    assert flat.onnx_nodes == ["flat"] and not flat.fused
    assert profile.ops_ms == pytest.approx(0.22)


def _counter(name: str, kind: str, exec_type: str, ms: float, status: str = "EXECUTED") -> Any:
    return SimpleNamespace(node_name=name, node_type=kind, exec_type=exec_type,
                           status=f"Status.{status}", real_time=dt.timedelta(milliseconds=ms))


def test_openvino_counters_are_the_profiled_runs_own_mean() -> None:
    # The counters are a mean over every run of the compiled model: after 3 warm-up runs
    # (the first slow) 2.0 ms, after 3 + 10 runs 1.0 ms: the 10 ran 0.7 ms each.
    before = [_counter("conv0/WithoutBiases", "Convolution", "brgconv_avx2_f32", 2.0)]
    after = [_counter("conv0/WithoutBiases", "Convolution", "brgconv_avx2_f32", 1.0),
             _counter("relu0", "Relu", "undef", 0.0, "NOT_RUN")]
    profile = from_counters(before, after, 3, {"conv0/WithoutBiases": [
        "conv0/WithoutBiases", "relu0"]}, 10)
    (row,) = profile.rows
    assert row.ms == pytest.approx(0.7) and row.fused
    assert row.onnx_nodes == ["conv0", "relu0"] and row.exec == "brgconv_avx2_f32"


def test_about_a_second_of_runs_is_profiled() -> None:
    assert profiled_runs(None) == 5 and profiled_runs(0.1) == 50 and profiled_runs(100) == 10


def _profiled() -> TargetReport:
    profile = OpProfile(source="onnxruntime profiler", runs=10, wall_ms=2.0, ops_ms=1.5,
                        note=EVIL,
                        rows=[OpRow(node=EVIL, op_type=EVIL, exec=EVIL, ms=1.0, share=2 / 3,
                                    onnx_nodes=[EVIL], fused=True),
                              OpRow(node="b", op_type="Relu", ms=0.5, share=1 / 3)])
    return TargetReport(name="host-cpu", profile="host-cpu", backend="onnxruntime",
                        op_profile=profile, memory=Memory(peak_mb=40.0, init_mb=38.0,
                                                          process_peak_mb=90.0))


def _report(target: TargetReport) -> Report:
    return Report(recipe="r", recipe_file="r.yaml", edgebuild_version="0", started="now",
                  seconds=1.0, exit_code=0, stages=[], targets=[target], counts={})


def test_report_shows_the_profile_with_every_name_escaped() -> None:
    report = _report(_profiled())
    page = html_page(report)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "runtime peak 40.0 MB" in page and "(fused group)" in page
    assert "Note: &lt;script&gt;" in page  # a profile's note (TFLite's) is escaped too
    text = markdown(report)
    assert "<script>" not in text and "](http" not in text
    assert "### Where the time and memory go: host-cpu" in text
    assert "| `Relu` | 0.500 | 33% |" in text


def test_the_record_keeps_trtexec_layers_and_reads_a_profile() -> None:
    target = _profiled()
    assert target.op_profile is not None
    stored = LatencyRecord(p50=1.0, profile=target.op_profile, memory=target.memory).to_json()
    profile, memory = recorded(json.loads(json.dumps(stored)))
    assert profile == target.op_profile and memory == target.memory
    layers = recorded({"p50": 1.0, "profile": [{"count": 3}, {"name": "l", "averageMs": 1}]})
    assert layers == (None, None)  # trtexec's list: kept in the record, not an OpProfile


def test_names_go_back_to_the_exported_onnx_nodes() -> None:
    from edgebuild.backends.openvino.profile import onnx_name

    assert onnx_name("/_blocks.2/_depthwise_conv/Conv_output_0/WithoutBiases") == \
        "/_blocks.2/_depthwise_conv/Conv"
    assert onnx_name("conv0/WithoutBiases") == "conv0" and onnx_name("relu0") == "relu0"
    # ORT's NCHWc node is named after the tensor it writes; PyTorch named that tensor
    # after its node, the last of the fused group.
    graph = [("/b/Clip_output_0_nchwc", "Conv+Clip", ["x"], ["t"])]
    profile = from_trace([_node("/b/Clip_output_0_nchwc", "Conv", 10, 5), _run(5, 20)], 1,
                         graph)
    assert profile.rows[0].onnx_nodes == ["/b/Clip"] and profile.rows[0].fused


@pytest.mark.parametrize("profile", ["snapdragon", "iphone", "jetson-orin-nano", "android"])
def test_memory_of_a_device_runtime_is_not_measurable_here(profile: str) -> None:
    """Only a runtime that runs in this process is measured: a phone's, a Jetson's or an
    emulator's memory is not read on this host, and says so."""
    from edgebuild.core.target import Target
    from edgebuild.measuring.footprint import measure_memory
    from edgebuild.recipe.profiles import BUILTIN_TARGETS, load_profiles

    target = Target(name="t", profile=load_profiles([BUILTIN_TARGETS])[profile].profile)
    artifact = Artifact("k" * 64, "x", Path(), {}, {}, {})
    memory = measure_memory(artifact, target, None, {}, {})
    assert memory.peak_mb is None
    assert memory.unmeasurable is not None and "not measurable here" in memory.unmeasurable


def test_tflite_memory_is_measured_on_the_host_not_on_a_phone() -> None:
    """TFLite's host runner runs LiteRT in the measuring process (as ONNX Runtime's), so
    its memory is read here; on a phone it is benchmark_model's."""
    from edgebuild.core.target import Target
    from edgebuild.recipe.profiles import BUILTIN_TARGETS, load_profiles
    from edgebuild.registry import load_backend

    android = load_profiles([BUILTIN_TARGETS])["android"].profile
    backend = load_backend("tflite")
    on_phone = Target(name="phone", profile=android)
    on_host = on_phone.variant("host", {"latency_on": "host"}, None)
    assert not backend.memory_measurable(on_phone)
    assert backend.memory_measurable(on_host)
    assert load_backend("onnxruntime").memory_measurable(on_phone)  # the class's flag
