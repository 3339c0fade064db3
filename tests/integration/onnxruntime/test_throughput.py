"""measure-throughput on real runtimes: ONNX Runtime as several single-thread sessions in
threads, OpenVINO with its THROUGHPUT hint and async requests. What is checked is the
record's consistency and the gate's wiring, never a speed (no timed assertion)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from edgebuild import api

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytestmark = pytest.mark.onnxruntime

RECIPE = """\
name: tp
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
targets:
  host-cpu:
    gates: {throughput: {min_fps: 1, seconds: 0.5}}
  host-cpu-impossible:
    profile: host-cpu
    gates: {throughput: {min_fps: 1.0e+12, streams: 3, seconds: 0.5, on_noisy: fail}}
"""
OPENVINO = """\
  intel-cpu:
    gates: {throughput: {min_fps: 1, seconds: 0.5}}
"""


def _throughput(tmp_path: Path) -> dict[str, dict[str, object]]:
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    return {g["target"]: g for t in report["targets"] for g in t["gates"]
            if g["gate"] == "throughput"}


@pytest.mark.slow
def test_sessions_in_threads_and_the_gate(tiny_project: Callable[..., Path],
                                          tmp_path: Path) -> None:
    recipe = tiny_project(RECIPE)
    report = api.run(recipe, api.RunOptions(out=tmp_path / "out"))
    gates = _throughput(tmp_path)
    assert gates["host-cpu"]["status"] == "passed", gates["host-cpu"]
    impossible = gates["host-cpu-impossible"]
    assert impossible["status"] == "failed" and report.exit_code == 1, impossible
    for target, streams, each in (("host-cpu", 2, 1), ("host-cpu-impossible", 3, 1)):
        figures = gates[target]["details"]["throughput"]
        assert figures["streams"] == streams and figures["threads_per_stream"] == each
        assert figures["how"] == f"{streams} runner(s) of {each} thread(s), each in its own thread"
        assert figures["requests"] > 0 and figures["window_s"] >= 0.5
        assert figures["fps"] == pytest.approx(figures["requests"] / figures["window_s"],
                                               rel=0.01)
        assert 0 < figures["p50"] <= figures["p90"]


@pytest.mark.slow
def test_openvino_runs_async_requests_under_its_throughput_hint(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    pytest.importorskip("openvino", reason="the OpenVINO backend needs openvino")
    recipe = tiny_project(RECIPE.split("  host-cpu-impossible:")[0].replace(
        "  host-cpu:\n    gates: {throughput: {min_fps: 1, seconds: 0.5}}\n", OPENVINO))
    api.run(recipe, api.RunOptions(out=tmp_path / "out"))
    gate = _throughput(tmp_path)["intel-cpu"]
    assert gate["status"] == "passed", gate
    figures = gate["details"]["throughput"]
    assert figures["how"].startswith("OpenVINO THROUGHPUT hint: "), figures
    assert figures["streams"] >= 1 and figures["requests"] > 0
    assert figures["fps"] == pytest.approx(figures["requests"] / figures["window_s"], rel=0.01)
