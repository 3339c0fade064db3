"""recipes/text-recognizer.yaml's FP32 host build, as a user runs it: PP-OCRv4's recognizer
(a pretrained model shipped in rapidocr-onnxruntime) read against FP32 and against the
text the lines were rendered from."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest

from tests.conftest import REPO, edgebuild

pytestmark = [pytest.mark.onnxruntime, pytest.mark.slow]

Built = tuple[dict[str, Any], str]  # the report, and the run's output


@pytest.fixture(scope="module")
def text_build(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The FP32 and INT8 host builds in one run (they share the export and the reference)."""
    if importlib.util.find_spec("rapidocr_onnxruntime") is None:
        pytest.skip("needs rapidocr-onnxruntime (scripts/setup.sh installs it --no-deps)")
    folder = tmp_path_factory.mktemp("text")
    out = folder / "out"
    with pytest.MonkeyPatch.context() as env:  # as isolated_cache does for a test's own run
        env.setenv("XDG_CONFIG_HOME", str(folder / "config"))
        result = edgebuild("run", str(REPO / "recipes" / "text-recognizer.yaml"), "--target",
                           "host-cpu", "--target", "host-cpu-int8", "--out", str(out),
                           "--cache-dir", str(folder / "cache"))
    return json.loads((out / "report.json").read_text()), result.stdout + result.stderr


def test_the_recognizer_reads_the_rendered_text(text_build: Built) -> None:
    report, log = text_build
    gates = {g["gate"]: g for t in report["targets"] if t["name"] == "host-cpu"
             for g in t["gates"]}
    ctc = next(g for name, g in gates.items() if name.startswith("accuracy") and
               g["details"].get("task") == "ctc")
    assert ctc["status"] == "passed", log
    measured = ctc["measured"]
    # The same model twice: the build reads what FP32 reads, misreads included.
    assert measured["cer_labels"] == measured["reference_cer_labels"] < 2
    assert measured["sequence_match_labels"] >= 80  # 28 of 32 on Pillow's font
    assert "cer_labels" in ctc["message"]


def test_the_fidelity_budget_finds_an_int8_build_that_reads_the_text(
        text_build: Built) -> None:
    """host-cpu-int8: INT8 MatMul weights, and the budget keeps float what the recipe's CTC
    gate needs. The budget judges on this CPU's kernels, so the layers it keeps may differ
    between CPUs; the gate it must pass does not."""
    report, log = text_build
    gates = [g for t in report["targets"] if t["name"] == "host-cpu-int8" for g in t["gates"]
             if g["gate"].startswith("accuracy")]
    assert gates and all(g["status"] == "passed" for g in gates), log
    budget = next(s["metadata"]["budget"] for s in report["stages"]
                  if s["id"].startswith("quantize"))
    assert budget["chosen"] == budget["trials"][-1]["step"] and budget["trials"][-1]["passed"]
    assert not any(t["passed"] for t in budget["trials"][:-1]), "the first passing one is kept"
    # Every trial is shown by the gate's own figures, not only a cosine.
    assert all({"sequence_match", "cer"} <= set(t["metrics"]) for t in budget["trials"])
    ctc = next(g for g in gates if g["details"].get("task") == "ctc")
    assert ctc["measured"]["sequence_match"] >= 90 and ctc["measured"]["cer"] <= 1
