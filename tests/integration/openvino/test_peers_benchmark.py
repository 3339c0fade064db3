"""benchmarks/peers.py --quick runs end to end: every peer, an edgebuild artifact, JSON out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytest.importorskip("openvino", reason="the peers benchmark needs openvino and nncf")
pytest.importorskip("nncf", reason="the peers benchmark needs openvino and nncf")
pytestmark = [pytest.mark.openvino, pytest.mark.onnxruntime, pytest.mark.slow]

PHOTOS = Path("/usr/share/doc/opencv-doc/examples/data")


@pytest.mark.skipif(not PHOTOS.is_dir(), reason="needs Debian opencv-doc's photos")
def test_quick_run_writes_every_candidate(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    model = REPO / "build" / "peers-smoke-not-there.onnx"
    result = subprocess.run(
        [sys.executable, "benchmarks/peers.py", "--quick", "--json", str(out),
         "--artifact", f"missing={model}"], cwd=REPO, capture_output=True, text=True,
        check=False, timeout=300)
    assert result.returncode != 0 and "not found" in result.stderr  # a bad path fails early
    result = subprocess.run(
        [sys.executable, "benchmarks/peers.py", "--quick", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(out.read_text())
    names = [row["name"] for row in data["candidates"]]
    assert len(names) == 6 and names[0] == "PyTorch eager fp32"
    eager = data["candidates"][0]
    assert eager["accuracy"]["top1_agreement"] == 100.0
    assert eager["vs_eager"]["ratio"] == pytest.approx(1.0)
    assert all(row["rounds"] == 8 and row["latency_ms"]["p50"] > 0 for row in data["candidates"])
    assert "| PyTorch eager fp32 |" in result.stdout
