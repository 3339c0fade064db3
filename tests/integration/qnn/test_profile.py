"""QNN's per-op profile on the x86 HTP emulator (backends/qnn/profile.py): a real context
binary of a tiny model, profiled at `profiling_level: detailed`, parsed from the EP's CSV,
labelled the emulator's; the latency gate stays "not measurable here"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import edgebuild

pytestmark = pytest.mark.qnn

RECIPE = """\
name: qprof
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
datasets:
  samples: {kind: npz, path: samples.npz, labels: y}
targets:
  snapdragon:
    options: {precision: int8, calibration_dataset: samples}
    measure: {profile: true}
    policy: {unmeasurable: warn}
    gates:
      latency: {budget_ms: 5}
"""
CYCLES_TOLERANCE = 0.01  # the rows are per-run means, each rounded to a whole cycle


@pytest.mark.slow
def test_emulator_profile_in_the_report(tiny_project: Callable[..., Path],
                                        tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = edgebuild("run", str(tiny_project(RECIPE)), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((out / "report.json").read_text())
    (target,) = report["targets"]
    latency = next(g for g in target["gates"] if g["gate"] == "latency")
    assert latency["status"] == "unmeasurable"
    assert "no Snapdragon device attached" in latency["message"]
    profile = target["op_profile"]
    assert profile is not None and not profile.get("unmeasurable"), profile
    assert "emulator" in profile["source"] and "not phone time" in profile["source"]
    assert "not the phone's" in profile["note"]
    rows = profile["rows"]
    assert rows and profile["runs"] >= 1
    # QNN's own total: the op cycles add up to the HTP's cycles for the graph.
    summed = sum(row["cycles"] for row in rows)
    assert abs(summed - profile["cycles"]) <= CYCLES_TOLERANCE * profile["cycles"] + len(rows)
    assert abs(sum(row["share"] for row in rows) - 1.0) < 1e-6
    # The accelerator's time is inside QNN's execute call around it (nested, not a speed).
    assert profile["ops_ms"] <= profile["runtime_ms"] * (1 + 1e-9)
    # The MatMul node (a QDQ group on the HTP) is named back to the ONNX graph.
    graph_nodes = json.loads(
        (out / "artifacts" / "snapdragon" / "qnn_nodes.json").read_text())["nodes"]
    mapped = [row for row in rows if row.get("onnx_nodes")]
    assert mapped and all(set(row["onnx_nodes"]) <= set(graph_nodes) for row in mapped)
    assert any(row["op_type"] == "MatMul" for row in mapped), rows
    summary = (out / "summary.md").read_text()
    assert "not phone time" in summary and "HTP (emulator)" in summary
    # Never cached: the next run asks for a phone again, and profiles again.
    again = edgebuild("run", str(tiny_project(RECIPE)), "--out", str(out))
    assert again.returncode == 0
    stages = {s["id"]: s for s in json.loads((out / "report.json").read_text())["stages"]}
    assert not stages["measure-latency@snapdragon"]["cached"]
