"""Per-operator profile of a .tflite on this host's LiteRT (the C API's profiler, in a
process of its own), through the real CLI (issue 32)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import edgebuild
from tests.integration.profile_models import check_profile, read_report, write_project


def test_litert_profile_adds_up_and_names_xnnpack_kernels(tmp_path: Path) -> None:
    recipe = write_project(tmp_path / "project", "android", "{latency_on: host}")
    # TFLite's memory is not measured on this host (measures_memory): no memory gate.
    recipe.write_text(recipe.read_text().replace("      memory: {max_mb: 2000}\n", ""))
    out = tmp_path / "out"
    done = edgebuild("run", str(recipe), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    found = check_profile(read_report(out), "android", memory=False)
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
