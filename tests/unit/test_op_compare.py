"""Two targets' profiles side by side by op type (issue 32): the table from typed records,
which pairs a report shows, every model-file name escaped, `edgebuild compare`'s per-op
view, and the planner's profiling mode (`edgebuild profile`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.cli import main
from edgebuild.errors import PlanError
from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.measure.record import OpProfile, OpRow
from edgebuild.plan.planner import build_plan
from edgebuild.recipe.loader import load_recipe
from edgebuild.report.html import html_page
from edgebuild.report.model import Report, TargetReport
from edgebuild.report.opcompare import (
    across_reports,
    compare_profiles,
    comparisons,
    html_section,
    markdown_lines,
    pairs,
    text_lines,
)
from edgebuild.report.render import markdown
from edgebuild.run.profile import for_profiling

EVIL = "<script>alert(1)</script>|`x`"


def _profile(times: dict[str, float]) -> OpProfile:
    """One row per op type (name: `<type>_0`), ms per run as given."""
    total = sum(times.values())
    return OpProfile(source="onnxruntime profiler", runs=10, ops_ms=total, wall_ms=total * 1.1,
                     rows=[OpRow(node=f"{kind}_0", op_type=kind, exec="CPUExecutionProvider",
                                 ms=ms, share=ms / total) for kind, ms in times.items()])


FP32 = _profile({"Conv": 4.0, "MatMul": 2.0, "Relu": 0.5})
INT8 = _profile({"Conv": 1.0, "MatMul": 3.0, "QuantizeLinear": 1.5, "DequantizeLinear": 0.5})


def test_the_table_has_ratios_shares_and_the_op_types_of_one_side() -> None:
    c = compare_profiles("host-cpu", FP32, "host-cpu-int8", INT8, "same profile")
    rows = {r.op_type: r for r in c.rows}
    assert rows["Conv"].ratio == pytest.approx(0.25)
    assert rows["MatMul"].ratio == pytest.approx(1.5)
    assert rows["Conv"].a_share == pytest.approx(4.0 / 6.5)
    assert rows["MatMul"].b_share == pytest.approx(3.0 / 6.0)
    assert rows["QuantizeLinear"].ratio is None and rows["QuantizeLinear"].a_ms is None
    assert c.only_a == ["Relu"]
    assert sorted(c.only_b) == ["DequantizeLinear", "QuantizeLinear"]
    assert (c.a_ms, c.b_ms) == (pytest.approx(6.5), pytest.approx(6.0))
    # The largest difference first: Conv (-3 ms), then QuantizeLinear (+1.5 ms), …
    assert [r.op_type for r in c.rows][:2] == ["Conv", "QuantizeLinear"]
    assert c.rows[0].delta_ms == pytest.approx(-3.0)
    text = "\n".join(markdown_lines([c]))
    assert "| `Conv` | 4.000 (62%) | 1.000 (17%) | 0.25× | -3.000 |" in text
    assert "| `QuantizeLinear` | — | 1.500 (25%) | only B | +1.500 |" in text
    assert "Only in host-cpu-int8: `QuantizeLinear`, `DequantizeLinear`." in text \
        or "Only in host-cpu-int8: `DequantizeLinear`, `QuantizeLinear`." in text


def _target(name: str, profile: OpProfile | None, base: str = "host-cpu",
            backend: str = "onnxruntime", over: str | None = None) -> TargetReport:
    gates = []
    if over is not None:
        gates.append(GateResult(target=name, gate="speedup", status=GateStatus.PASSED,
                                counts_as_failure=False, details={"over": over},
                                message="faster"))
    return TargetReport(name=name, profile=base, backend=backend, op_profile=profile,
                        gates=gates)


def _report(*targets: TargetReport) -> Report:
    return Report(recipe="r", recipe_file="r.yaml", edgebuild_version="0", started="now",
                  seconds=1.0, exit_code=0, stages=[], targets=list(targets), counts={})


def test_pairs_follow_the_documented_rule() -> None:
    report = _report(
        _target("host-cpu", FP32),
        _target("host-cpu-int8", INT8),  # same profile and backend as host-cpu
        _target("host-cpu-fp16", FP32),  # also: against the first of the group
        _target("intel-cpu", FP32, base="intel-cpu", backend="openvino"),
        _target("intel-cpu-int8", INT8, base="intel-cpu", backend="openvino",
                over="intel-cpu"),  # a speed-up over intel-cpu (and the same profile)
        _target("rpi4", None, base="host-cpu"),  # no profile: never paired
        _target("unmeasured", OpProfile(unmeasurable="not measurable here: no profiler"),
                over="host-cpu"),
        _target("other-ep", INT8, backend="openvino", over="host-cpu"),  # over: paired
    )
    found = [(a.name, b.name) for a, b, _ in pairs(report)]
    assert found == [("intel-cpu", "intel-cpu-int8"), ("host-cpu", "other-ep"),
                     ("host-cpu", "host-cpu-int8"), ("host-cpu", "host-cpu-fp16")]
    assert "speedup gate is over intel-cpu" in pairs(report)[0][2]


def test_the_speedup_field_pairs_when_the_gate_did_not_run() -> None:
    target = _target("int8", INT8, base="other")
    target.speedup_over = "host-cpu"
    assert [(a.name, b.name) for a, b, _ in pairs(_report(_target("host-cpu", FP32), target))
            ] == [("host-cpu", "int8")]


def test_every_model_file_name_is_escaped_in_both_reports() -> None:
    evil = _profile({EVIL: 1.0, "Conv": 2.0})
    report = _report(_target("host-cpu", FP32), _target("host-cpu-int8", evil))
    page = html_page(report)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Per-op comparisons" in page and "host-cpu (A) vs host-cpu-int8 (B)" in page
    section = html_section(comparisons(report))
    assert "<script>" not in section and section.count("<table>") == 1
    summary = markdown(report)
    assert "### Per-op comparison: host-cpu (A) vs host-cpu-int8 (B)" in summary
    assert "<script>" not in summary  # md_code: a table cell cannot be broken out of
    section_md = summary.split("### Per-op comparison")[1]
    line = next(x for x in section_md.splitlines() if "alert(1)" in x and x.startswith("| "))
    assert line.count(" | ") == 4  # the `|` in the name did not add a column


def test_no_comparison_without_two_profiles() -> None:
    report = _report(_target("host-cpu", FP32), _target("host-cpu-int8", None))
    assert comparisons(report) == [] and html_section([]) == ""
    assert "Per-op comparison" not in markdown(report)


def test_compare_command_shows_time_by_op_type(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    base = _report(_target("host-cpu", FP32), _target("rpi4", None))
    head = _report(_target("host-cpu", INT8), _target("intel-cpu", FP32))
    (tmp_path / "base.json").write_text(base.model_dump_json())
    (tmp_path / "head.json").write_text(head.model_dump_json())
    code = main(["compare", str(tmp_path / "base.json"), str(tmp_path / "head.json")])
    out = capsys.readouterr().out
    assert code == 0  # no latency samples: nothing judged, the per-op view is shown
    assert "per-op: base host-cpu (A) vs head host-cpu (B)" in out
    assert "QuantizeLinear" in out and "only B" in out and "0.25×" in out
    assert "only in head host-cpu: " in out
    assert [c.b for c in across_reports(base, head)] == ["head host-cpu"]


def test_terminal_lines_carry_no_control_characters() -> None:
    evil = _profile({"Conv\x1b[2J": 1.0})
    lines = text_lines([compare_profiles("a", evil, "b", FP32, "x")])
    assert not any("\x1b" in line for line in lines)


RECIPE = """\
name: prof
model: {factory: "m.py:build"}
inputs: [{name: x, shape: [1, 4]}]
passes: [export-onnx]
datasets:
  samples: {kind: npz, path: s.npz}
targets:
  host-cpu:
    gates:
      accuracy: {dataset: samples, min_top1_agreement: 99}
      latency: {budget_ms: 5}
      throughput: {streams: 2, min_fps: 1}
  host-cpu-int8:
    profile: host-cpu
    measure: {profile: true}
    gates:
      speedup: {over: host-cpu, min_speedup: 1.1}
"""


def test_profiling_plans_the_chain_compile_and_a_profiling_latency(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def build(): ...\n")
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE)
    loaded = load_recipe(path)
    normal = build_plan(loaded, only=["host-cpu"])
    built = build_plan(for_profiling(loaded, ["host-cpu", "host-cpu-int8"]),
                       only=["host-cpu", "host-cpu-int8"], profiling=True)
    ops = sorted(s.op for s in built.order())
    assert ops == sorted(["export-onnx", "compile", "compile", "measure-latency",
                          "measure-latency"])  # no reference, infer, throughput, speed-up
    stages = {s.id: s for s in built.order()}
    assert stages["measure-latency@host-cpu"].params == {"profile": True}
    # A target that profiles anyway: the run's own stage (same params, same key).
    assert stages["measure-latency@host-cpu-int8"].params == {}
    # The build is the run's: the compile stage is the same stage (inputs, params).
    before = {s.id: s for s in normal.order()}["compile@host-cpu"]
    assert (stages["compile@host-cpu"].params, stages["compile@host-cpu"].inputs) == \
        (before.params, before.inputs)


def test_a_search_target_cannot_be_profiled_alone(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def build(): ...\n")
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE + """\
  searched:
    profile: host-cpu
    gates: {accuracy: {dataset: samples, min_top1_agreement: 99}}
    search:
      candidates:
        fp32: {}
        int8: {passes: [{quantize: {mode: dynamic}}]}
""")
    loaded = load_recipe(path)
    with pytest.raises(PlanError, match="is a search"):
        build_plan(for_profiling(loaded, ["searched"]), only=["searched"], profiling=True)
