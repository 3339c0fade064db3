"""Shape profiles through the real CLI: a net exported from PyTorch with dynamic H/W,
timed at two profiles on ONNX Runtime, OpenVINO (static IR reshaped at measure time,
and dynamic IR) and TFLite (pinned at the example shape, resized by the runner), with
accuracy gated on two datasets of different image sizes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import edgebuild

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytest.importorskip("openvino", reason="the OpenVINO backend needs openvino")
pytest.importorskip("torch", reason="the model is exported from PyTorch")

HERE = Path(__file__).parent

RECIPE = f"""\
name: shapes
model: {{factory: {HERE}/heat_net.py:build}}
inputs: [{{name: image, shape: [1, 3, 32, 48], dynamic_axes: {{2: height, 3: width}}}}]
outputs: [heat]
shapes:
  small: {{height: 16, width: 24}}
  large: {{height: 64, width: 96}}
datasets:
  small: {{kind: npz, path: small.npz, arrays: {{image: image}}}}
  large: {{kind: npz, path: large.npz, arrays: {{image: image}}}}
targets:
  host-cpu:
    measure: {{min_seconds: 0.2, min_iterations: 20, max_busy_share: null}}
    gates:
      accuracy:
        - {{dataset: small, task: dense, max_abs_error: 0.0001}}
        - {{dataset: large, task: dense, max_abs_error: 0.0001}}
      latency: {{budget_ms: {{small: 500, large: 1000}}}}
  ov-static:
    profile: intel-cpu
    options: {{shapes: static}}
    measure: {{min_seconds: 0.2, min_iterations: 20, max_busy_share: null}}
    gates:
      accuracy: {{dataset: small, task: dense, max_abs_error: 0.001}}
      latency: {{budget_ms: 1000}}
  ov-dynamic:
    profile: intel-cpu
    options: {{shapes: dynamic}}
    measure: {{min_seconds: 0.2, min_iterations: 20, max_busy_share: null}}
    gates:
      accuracy: {{dataset: large, task: dense, max_abs_error: 0.001}}
      latency: {{budget_ms: 1000}}
"""

TFLITE = """\
  android:
    options: {latency_on: host}
    measure: {min_seconds: 0.2, min_iterations: 20, max_busy_share: null}
    gates:
      latency: {budget_ms: 1000}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "small.npz", image=rng.random((4, 3, 16, 24), dtype=np.float32))
    np.savez(tmp_path / "large.npz", image=rng.random((4, 3, 64, 96), dtype=np.float32))
    return tmp_path


Gates = dict[str, dict[str, dict]]  # target -> gate -> the report's gate


@pytest.fixture(scope="module")
def every_target(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Gates]:
    """The recipe's ONNX Runtime and OpenVINO targets and, where ai-edge-litert is
    installed, the TFLite one, built in one run (one export, one reference per dataset)
    for the module's tests to read."""
    folder = tmp_path_factory.mktemp("shapes")
    rng = np.random.default_rng(0)
    np.savez(folder / "small.npz", image=rng.random((4, 3, 16, 24), dtype=np.float32))
    np.savez(folder / "large.npz", image=rng.random((4, 3, 64, 96), dtype=np.float32))
    tflite = TFLITE if importlib.util.find_spec("ai_edge_litert") is not None else ""
    return folder, _run(folder, RECIPE + tflite)


def _run(project: Path, recipe: str, *targets: str) -> dict[str, dict[str, dict]]:
    (project / "shapes.yaml").write_text(recipe)
    args = [a for t in targets for a in ("--target", t)]
    result = edgebuild("run", str(project / "shapes.yaml"), "--out", str(project / "build"),
                       "--cache", str(project / "cache"), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((project / "build" / "report.json").read_text())
    found: dict[str, dict[str, dict]] = {}
    for target in report["targets"]:
        for gate in target["gates"]:
            found.setdefault(gate["target"], {})[gate["gate"]] = gate
    return found


@pytest.mark.slow
@pytest.mark.onnxruntime
@pytest.mark.openvino
def test_two_profiles_on_onnxruntime_and_openvino(
        every_target: tuple[Path, Gates]) -> None:
    project, gates = every_target
    for target in ("host-cpu", "ov-static", "ov-dynamic"):
        small, large = gates[target]["latency[small]"], gates[target]["latency[large]"]
        assert small["status"] == large["status"] == "passed", (small, large)
        assert small["details"]["shapes"] == {"image": [1, 3, 16, 24]}
        assert large["details"]["shapes"] == {"image": [1, 3, 64, 96]}
        # What the artifact produced: each profile really ran at its size.
        assert small["details"]["output_shapes"] == {"heat": [1, 1, 16, 24]}
        assert large["details"]["output_shapes"] == {"heat": [1, 1, 64, 96]}
    assert gates["host-cpu"]["latency[small]"]["limits"]["budget_ms"] == 500
    assert gates["host-cpu"]["latency[large]"]["limits"]["budget_ms"] == 1000
    # Two datasets of different sizes: one reference + infer each, each gated.
    accuracy = gates["host-cpu"]
    assert accuracy["accuracy[small]"]["status"] == accuracy["accuracy[large]"]["status"] \
        == "passed"
    assert accuracy["accuracy[small]"]["measured"]["samples"] == 4
    assert accuracy["accuracy[large]"]["measured"]["max_abs_error"] < 1e-4
    summary = (project / "build" / "summary.md").read_text()
    assert "latency[small]" in summary and "latency[large]" in summary
    html = (project / "build" / "report.html").read_text()
    assert "profile small" in html and "profile large" in html


@pytest.mark.slow
@pytest.mark.tflite
def test_tflite_resizes_the_pinned_model(
        every_target: tuple[Path, Gates]) -> None:
    pytest.importorskip("ai_edge_litert", reason="the TFLite backend needs ai-edge-litert")
    gates = every_target[1]["android"]
    small, large = gates["latency[small]"], gates["latency[large]"]
    assert small["status"] == large["status"] == "passed", (small, large)
    # Pinned at 32x48, resized by the runner: NHWC in, the heat map out at each size.
    assert small["details"]["shapes"] == {"image": [1, 3, 16, 24]}
    assert large["details"]["output_shapes"]["heat"] in ([1, 1, 64, 96], [1, 64, 96, 1])
    assert small["details"]["output_shapes"]["heat"] in ([1, 1, 16, 24], [1, 16, 24, 1])


FLAT = f"""\
name: flat
model: {{factory: {HERE}/flat_net.py:build}}
inputs: [{{name: image, shape: [1, 3, 32, 48], dynamic_axes: {{2: height, 3: width}}}}]
outputs: [logits]
shapes:
  built: {{height: 32, width: 48}}
  small: {{height: 16, width: 24}}
targets:
  android:
    options: {{latency_on: host}}
    measure: {{min_seconds: 0.1, min_iterations: 5, max_busy_share: null}}
    gates:
      latency: {{budget_ms: 1000}}
"""


@pytest.mark.slow
@pytest.mark.tflite
def test_tflite_that_cannot_resize_fails_the_profile_row(tmp_path: Path) -> None:
    """A conv net flattened into a Linear: its ONNX names H/W dynamic, but the TFLite
    model (and the Linear) only takes the example size. The other profile is a failed
    `latency[small]` row with the runner's message and hint; the built one is timed."""
    pytest.importorskip("ai_edge_litert", reason="the TFLite backend needs ai-edge-litert")
    (tmp_path / "flat.yaml").write_text(FLAT)
    run = edgebuild("run", str(tmp_path / "flat.yaml"), "--out", str(tmp_path / "build"),
                    "--cache", str(tmp_path / "cache"))
    assert "Traceback" not in run.stdout + run.stderr
    assert run.returncode == 1, run.stdout + run.stderr  # a failed gate, not a crash
    report = json.loads((tmp_path / "build" / "report.json").read_text())
    gates = {g["gate"]: g for t in report["targets"] for g in t["gates"]}
    assert gates["latency[built]"]["status"] == "passed", gates["latency[built]"]
    small = gates["latency[small]"]
    assert small["status"] == "failed", small
    assert "pinned at the example shape and cannot be resized for input 'image' to " \
        "{'image': [1, 3, 16, 24]}" in small["message"], small["message"]
    assert "remove the size from `shapes:`" in small["message"]


@pytest.mark.slow
@pytest.mark.onnxruntime
def test_baseline_is_compared_per_profile(project: Path) -> None:
    """`run --baseline` times the baseline's artifact against this build's at each
    profile: one `regression[<profile>]` gate per profile, each from its own pair."""
    recipe = RECIPE.split("  ov-static:")[0]
    first = _run(project, recipe, "host-cpu")
    assert "regression[small]" not in first["host-cpu"]  # nothing to compare with yet
    again = edgebuild("run", str(project / "shapes.yaml"), "--out", str(project / "again"),
                      "--cache", str(project / "cache"), "--baseline",
                      str(project / "build" / "report.json"))
    assert again.returncode in (0, 1), again.stdout + again.stderr
    report = json.loads((project / "again" / "report.json").read_text())
    gates = {g["gate"]: g for t in report["targets"] for g in t["gates"]}
    assert "regression" not in gates
    compare = next(s for s in report["stages"] if s["id"].startswith("compare-latency"))
    rows = compare["metadata"]["profiles"]
    assert set(rows) == {"small", "large"}
    # Each profile was timed as its own pair at its own size.
    for profile, size in (("small", [1, 1, 16, 24]), ("large", [1, 1, 64, 96])):
        assert rows[profile]["baseline_output_shapes"] == {"heat": size}, rows
        assert rows[profile]["candidate_output_shapes"] == {"heat": size}, rows
    for profile in ("small", "large"):
        gate = gates[f"regression[{profile}]"]
        assert gate["details"]["profile"] == profile
        assert gate["status"] in ("passed", "undecided"), gate  # the same model, twice
        assert 0.5 < gate["measured"]["ratio"] < 2, gate
        assert gate["message"].startswith(f"{profile}: ")


BUDGETS = "      latency: {budget_ms: {small: 500, large: 1000}}\n"
SEARCH = RECIPE.split("  ov-static:")[0].replace(BUDGETS, BUDGETS + """\
    search:
      candidates:
        all: {}
        basic: {options: {graph_optimization_level: basic}}
""")


@pytest.mark.slow
@pytest.mark.onnxruntime
def test_search_selects_over_every_profile(project: Path) -> None:
    """`select` times its candidates at each profile, in the shapes the profile names, and
    chooses on the geometric mean of their medians."""
    (project / "search.yaml").write_text(SEARCH)
    run = edgebuild("run", str(project / "search.yaml"), "--out", str(project / "build"),
                    "--cache", str(project / "cache"))
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((project / "build" / "report.json").read_text())
    select = next(s for s in report["stages"] if s["id"].startswith("select@"))
    ranking = select["metadata"]
    assert ranking["chosen"] in ("all", "basic") and ranking["rounds"] >= 16  # 8 a profile
    for candidate in ranking["candidates"]:
        assert set(candidate["profiles"]) == {"small", "large"}, candidate
        assert candidate["median_ms"] == candidate["profiles"]["small"]["median_ms"]
    produced = sorted(p.name for p in (project / "cache").rglob("blocks_ms*.npy"))
    assert produced == ["blocks_ms-large.npy", "blocks_ms-small.npy"]
    (search,) = [g for t in report["targets"] for g in t["gates"] if g["gate"] == "search"]
    assert "geometric mean over the 2 shape profiles" in search["message"], search
