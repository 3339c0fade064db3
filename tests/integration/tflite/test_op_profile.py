"""Per-operator profile of a .tflite on this host's LiteRT (the C API's profiler, in a
process of its own), through the real CLI (issue 32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import edgebuild
from tests.integration.profile_models import check_profile, read_report, write_project


@pytest.mark.slow
def test_litert_profile_adds_up_and_names_xnnpack_kernels(tmp_path: Path) -> None:
    recipe = write_project(tmp_path / "project", "android", "{latency_on: host}")
    out = tmp_path / "out"
    done = edgebuild("run", str(recipe), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    # On the host LiteRT runs in the measuring process: its peak memory is read as
    # ONNX Runtime's is (measuring/footprint.py), and the memory gate judges it.
    found = check_profile(read_report(out), "android", memory=True)
    profile = found["op_profile"]
    assert profile["source"] == "litert profiler (C API)"
    assert profile["runtime_ms"] <= profile["wall_ms"]
    rows = profile["rows"]
    # XNNPACK runs the four 3x3 convs (relu fused) as its own F32 convolutions.
    convs = [r for r in rows if r["op_type"].startswith("Convolution")]
    assert len(convs) == 4
    assert all(r["exec"].startswith("XNNPACK Convolution (NHWC, F32)") for r in convs)
    assert all(r["node"].startswith("XNNPACK 0:") for r in convs)
    # No row claims an ONNX node: onnx2tf's tensor names are its TF ops' (the note).
    assert all(r["onnx_nodes"] is None for r in rows) and "ONNX" in profile["note"]


@pytest.mark.slow
def test_litert_reads_the_thread_count_and_the_builtin_kernel_mode(tmp_path: Path) -> None:
    """The CPU options reach the wheel's libLiteRt.so: two threads make XNNPACK's pool
    (more OS threads than with one), and `kernel_mode` builtin runs TFLite's own kernels
    (`delegate: cpu`): every event a TFLite node (type 2), none of XNNPACK's (type 8)."""
    import json
    import subprocess
    import sys

    import numpy as np

    from edgebuild.backends.tflite.litert_c import LiteRtProfile

    recipe = write_project(tmp_path / "project", "android", "{latency_on: host}")
    recipe.write_text(recipe.read_text().replace("      memory: {max_mb: 2000}\n", ""))
    out = tmp_path / "out"
    done = edgebuild("run", str(recipe), "--out", str(out), "--target", "plain")
    assert done.returncode == 0, done.stdout + done.stderr
    tflite = out / "artifacts" / "plain" / "model.tflite"
    np.savez(tmp_path / "feeds.npz", input0=np.zeros((1, 64, 64, 3), np.float32))

    def run(threads: int, builtin: bool) -> LiteRtProfile:
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps({
            "model": str(tflite), "feeds": str(tmp_path / "feeds.npz"),
            "inputs": {"x": "input0"}, "threads": threads, "builtin": builtin,
            "warmup": 1, "runs": 2}))
        child = subprocess.run([sys.executable, "-m", "edgebuild.backends.tflite.litert_c",
                                str(spec)], capture_output=True, text=True, check=False)
        assert child.returncode == 0, child.stderr[-2000:]
        return LiteRtProfile.model_validate_json(child.stdout.strip().splitlines()[-1])

    one, two = run(1, False), run(2, False)
    assert one.tasks is not None and two.tasks is not None and two.tasks > one.tasks
    builtin = run(1, True)
    kinds = {e.type for e in builtin.events}
    assert 2 in kinds and 8 not in kinds
    assert "CONV_2D" in {e.tag for e in builtin.events}
