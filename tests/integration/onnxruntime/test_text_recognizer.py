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


@pytest.mark.skipif(importlib.util.find_spec("rapidocr_onnxruntime") is None,
                    reason="needs rapidocr-onnxruntime (scripts/setup.sh installs it --no-deps)")
def test_the_fidelity_budget_finds_an_int8_build_that_reads_the_text(tmp_path: Path) -> None:
    """host-cpu-int8: INT8 MatMul weights, and the budget keeps float what the recipe's CTC
    gate needs. The budget judges on this CPU's kernels, so the layers it keeps may differ
    between CPUs; the gate it must pass does not."""
    result = edgebuild("run", str(REPO / "recipes" / "text-recognizer.yaml"), "--target",
                       "host-cpu-int8", "--out", str(tmp_path / "out"))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    gates = [g for t in report["targets"] for g in t["gates"] if g["gate"].startswith("accuracy")]
    assert gates and all(g["status"] == "passed" for g in gates), result.stdout + result.stderr
    budget = next(s["metadata"]["budget"] for s in report["stages"]
                  if s["id"].startswith("quantize"))
    assert budget["chosen"] == budget["trials"][-1]["step"] and budget["trials"][-1]["passed"]
    assert not any(t["passed"] for t in budget["trials"][:-1]), "the first passing one is kept"
    # Every trial is shown by the gate's own figures, not only a cosine.
    assert all({"sequence_match", "cer"} <= set(t["metrics"]) for t in budget["trials"])
    ctc = next(g for g in gates if g["details"].get("task") == "ctc")
    assert ctc["measured"]["sequence_match"] >= 90 and ctc["measured"]["cer"] <= 1
