"""recipes/text-recognizer.yaml's FP32 host build, as a user runs it: PP-OCRv4's recognizer
(a pretrained model shipped in rapidocr-onnxruntime) read against FP32 and against the
text the lines were rendered from."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import REPO, edgebuild

pytestmark = [pytest.mark.onnxruntime, pytest.mark.slow]


@pytest.mark.skipif(importlib.util.find_spec("rapidocr_onnxruntime") is None,
                    reason="needs rapidocr-onnxruntime (scripts/setup.sh installs it --no-deps)")
def test_the_recognizer_reads_the_rendered_text(tmp_path: Path) -> None:
    result = edgebuild("run", str(REPO / "recipes" / "text-recognizer.yaml"), "--target",
                       "host-cpu", "--out", str(tmp_path / "out"))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    gates = {g["gate"]: g for t in report["targets"] for g in t["gates"]}
    ctc = next(g for name, g in gates.items() if name.startswith("accuracy") and
               g["details"].get("task") == "ctc")
    assert ctc["status"] == "passed", result.stdout + result.stderr
    measured = ctc["measured"]
    # The same model twice: the build reads what FP32 reads, misreads included.
    assert measured["cer_labels"] == measured["reference_cer_labels"] < 2
    assert measured["sequence_match_labels"] >= 80  # 28 of 32 on Pillow's font
    assert "cer_labels" in ctc["message"]
