"""A small real conv net and a recipe that asks for a per-operator profile and memory,
for the profile tests of several backends (issue 32); built with onnx's helper."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

# The profile is checked against the profiled run's own wall time: the ops' sum over the
# mean wall time of the same runs (measuring/profiling.py: consistency).
#  - at most 1 + 5 %: the ops run inside the run (ONNX Runtime's sequential executor,
#    one inter-op thread; OpenVINO's one stream), so only the timers' µs rounding per
#    node can push the sum over; 5 % is ten times that rounding at this model's size.
#  - at least 0.5: four 32-channel 3×3 convs at 64×64 take a few ms; the Python call
#    and the runtime's work between nodes are a tenth of that here (0.81–0.93 seen on an
#    AVX2 EPYC with the CI running). Load preempts the process in proportion to where it
#    spends its time, inside the ops or between them, so it stretches both sides alike;
#    0.5 leaves that overhead room to grow fivefold before the check fails.
LOW, HIGH = 0.5, 1.05
CHANNELS, SIZE = 32, 64

RECIPE = """\
name: convnet
model: {onnx: conv.onnx}
inputs: [{name: x, shape: [1, 3, 64, 64]}]
outputs: [y]
targets:
  TARGET:
    measure: {warmup_iterations: 2, min_iterations: 10, min_seconds: 0,
              max_busy_share: null, threads: 1, profile: true}
    gates:
      latency: {budget_ms: 10000}
      memory: {max_mb: 2000}
  plain:
    profile: TARGET
    measure: {warmup_iterations: 2, min_iterations: 10, min_seconds: 0,
              max_busy_share: null, threads: 1}
    gates:
      latency: {budget_ms: 10000}
"""


def make_conv_onnx(path: Path) -> Path:
    """conv(3→32)+relu, three conv(32→32)+relu, global average pool, flatten."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, weights, previous, channels = [], [], "x", 3
    for i in range(4):
        w = (rng.standard_normal((CHANNELS, channels, 3, 3)) * 0.1).astype(np.float32)
        weights += [numpy_helper.from_array(w, f"w{i}"),
                    numpy_helper.from_array(np.zeros(CHANNELS, np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", [previous, f"w{i}", f"b{i}"], [f"c{i}"],
                                   name=f"conv{i}", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}")]
        previous, channels = f"r{i}", CHANNELS
    nodes += [helper.make_node("GlobalAveragePool", [previous], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["y"], name="flat")]
    graph = helper.make_graph(
        nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, CHANNELS])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def write_project(folder: Path, target: str, options: str = "") -> Path:
    """The recipe for `target`; `options` (a flow mapping) goes into both targets."""
    folder.mkdir(parents=True, exist_ok=True)
    make_conv_onnx(folder / "conv.onnx")
    recipe = folder / "convnet.yaml"
    text = RECIPE.replace("TARGET", target)
    if options:
        text = text.replace("    measure:", f"    options: {options}\n    measure:")
    recipe.write_text(textwrap.dedent(text))
    return recipe


def check_profile(report: dict[str, Any], target: str, memory: bool = True) -> dict[str, Any]:
    """The checks every backend's profile passes (and its memory, where the backend
    measures it: `memory`); returns the target's report."""
    found = next(t for t in report["targets"] if t["name"] == target)
    profile = found["op_profile"]
    assert profile is not None and not profile.get("unmeasurable"), profile
    rows = profile["rows"]
    assert rows and profile["runs"] >= 5
    ratio = profile["ops_ms"] / profile["wall_ms"]
    assert LOW <= ratio <= HIGH, f"ops {profile['ops_ms']} ms of {profile['wall_ms']} ms"
    assert abs(sum(r["ms"] for r in rows) - profile["ops_ms"]) <= 1e-6 * len(rows)
    assert abs(sum(r["share"] for r in rows) - 1) <= 1e-6 * len(rows)
    assert [r["ms"] for r in rows] == sorted((r["ms"] for r in rows), reverse=True)
    if memory:
        peak = found["memory"]
        assert peak["peak_mb"] > 0 and peak["process_peak_mb"] > peak["baseline_mb"]
        gate = next(g for g in found["gates"] if g["gate"] == "memory")
        assert gate["status"] == "passed" and gate["measured"]["peak_mb"] == peak["peak_mb"]
    plain = next(t for t in report["targets"] if t["name"] == "plain")
    assert plain["op_profile"] is None and plain["memory"] is None
    latency = next(s for s in report["stages"] if s["id"] == "measure-latency@plain")
    assert "profile" not in latency["metadata"] and "memory" not in latency["metadata"]
    return found


def read_report(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "report.json").read_text())
    return data
