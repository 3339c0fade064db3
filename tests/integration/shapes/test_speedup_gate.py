"""The speed-up gate on a real model: another target's build against this one, timed
interleaved in one process, decided per shape profile on the paired ratio's interval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import edgebuild

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytest.importorskip("torch", reason="the model is exported from PyTorch")

HERE = Path(__file__).parent
MEASURE = "{min_seconds: 0.2, min_iterations: 20, max_busy_share: null}"

RECIPE = f"""\
name: speedup
model: {{factory: {HERE}/heat_net.py:build}}
inputs: [{{name: image, shape: [1, 3, 32, 48], dynamic_axes: {{2: height, 3: width}}}}]
outputs: [heat]
shapes:
  small: {{height: 16, width: 24}}
  large: {{height: 64, width: 96}}
targets:
  host-cpu:
    measure: {MEASURE}
    gates: {{latency: {{budget_ms: 1000}}}}
  same:                 # the same build: about 1x as fast, so 0.5x passes
    profile: host-cpu
    measure: {MEASURE}
    gates: {{speedup: {{over: host-cpu, min_speedup: 0.5}}}}
  impossible:           # the same build cannot be 100x as fast
    profile: host-cpu
    measure: {MEASURE}
    gates: {{speedup: {{over: host-cpu, min_speedup: 100}}}}
"""


def _gates(project: Path, *targets: str) -> tuple[int, dict[str, dict], dict]:  # type: ignore[type-arg]
    (project / "r.yaml").write_text(RECIPE)
    args = [a for t in targets for a in ("--target", t)]
    run = edgebuild("run", str(project / "r.yaml"), "--out", str(project / "build"),
                    "--cache", str(project / "cache"), *args)
    assert "Traceback" not in run.stderr, run.stderr
    report = json.loads((project / "build" / "report.json").read_text())
    gates = {f"{g['target']}.{g['gate']}": g for t in report["targets"] for g in t["gates"]}
    return run.returncode, gates, report


@pytest.mark.slow
@pytest.mark.onnxruntime
def test_speedup_is_decided_per_profile_against_the_other_targets_build(
        tmp_path: Path) -> None:
    code, gates, report = _gates(tmp_path, "same", "impossible")
    # --target left host-cpu out: its build is planned (the baseline), its gates are not.
    assert not any(name.startswith("host-cpu.") for name in gates)
    assert {s["id"] for s in report["stages"] if s["id"].startswith("compile@")} == {
        "compile@host-cpu", "compile@same", "compile@impossible"}
    for profile in ("small", "large"):
        same = gates[f"same.speedup[{profile}]"]
        assert same["status"] in ("passed", "undecided"), same  # one model, twice
        assert 0.5 < same["measured"]["speedup"] < 2, same
        assert same["limits"] == {"min_speedup": 0.5}
        assert same["details"]["over"] == "host-cpu" and same["details"]["blocks"] >= 5
        assert same["message"].startswith(f"{profile}: ") and "as fast as host-cpu" in \
            same["message"]
        impossible = gates[f"impossible.speedup[{profile}]"]
        assert impossible["status"] == "failed", impossible
        assert "needs at least 100×" in impossible["message"]
    rows = next(s for s in report["stages"] if s["id"] == "compare-speed@same")["metadata"]
    # Each profile was timed as its own pair at its size.
    assert rows["profiles"]["large"]["candidate_output_shapes"] == {"heat": [1, 1, 64, 96]}
    assert rows["profiles"]["small"]["baseline_output_shapes"] == {"heat": [1, 1, 16, 24]}
    assert code == 1  # the impossible gate failed the run


def test_speedup_names_a_comparable_target(tmp_path: Path) -> None:
    bad = RECIPE.replace("over: host-cpu, min_speedup: 0.5", "over: host-cpux, min_speedup: 0.5")
    (tmp_path / "r.yaml").write_text(bad.replace(
        "over: host-cpu, min_speedup: 100", "over: impossible, min_speedup: 100"))
    run = edgebuild("validate", str(tmp_path / "r.yaml"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert "targets.same.gates.speedup.over: no target named 'host-cpux'" in run.stderr
    assert "did you mean 'host-cpu'?" in run.stderr
    assert "targets.impossible.gates.speedup.over: a target cannot be compared with itself" \
        in run.stderr
    assert "Traceback" not in run.stdout + run.stderr
