"""Decisions on a sparse binary map (issue 40, item 3): tests/models/text_heatmap.py, a heat
map positive on 2.2 % of its pixels, built INT8 (ONNX Runtime static QDQ) twice: calibrated
on pages with words (faithful) and on blank pages (calibration never sees a word: the
build's map stays at 0.04, it finds nothing).

Plain agreement scores the build that finds nothing at 97.8 % (100 % minus FP32's
positives): it is refused, and the gate its hint names — applied to that same recipe —
fails that build (no region found) and passes the faithful one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.fidelity.verdict import judge
from edgebuild.recipe.loader import load_recipe
from tests.models import text_heatmap

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.onnxruntime

OLD = "{dataset: pages, output: map, task: dense, threshold: 0.4, min_decision_agreement: 97}"
RECIPE = """\
name: text-map
model: {onnx: map.onnx}
inputs: [{name: page, shape: [1, 1, 64, 64]}]
outputs: [map]
datasets:
  pages: {kind: npz, path: pages.npz}
  text: {kind: npz, path: text.npz}
  blank: {kind: npz, path: blank.npz}
targets:
  int8-text:
    profile: host-cpu
    passes: [quantize: {mode: static, calibration: text}]
    gates: {accuracy: [GATE]}
  int8-blank:
    profile: host-cpu
    passes: [quantize: {mode: static, calibration: blank}]
    gates: {accuracy: [GATE]}
"""


def project(folder: Path, gate: str) -> Path:
    """The model, its pages (8 to gate on, 8 with words and 8 blank to calibrate on) and
    the recipe with `gate` on both INT8 targets."""
    if not (folder / "map.onnx").is_file():
        text_heatmap.write_model(folder / "map.onnx")
        np.savez(folder / "pages.npz", x=text_heatmap.pages(8, seed=1))
        np.savez(folder / "text.npz", x=text_heatmap.pages(8, seed=2))
        np.savez(folder / "blank.npz", x=text_heatmap.pages(8, seed=2, words=0))
    path = folder / "map.yaml"
    path.write_text(RECIPE.replace("GATE", gate))
    return path


def hinted(message: str, gate: str) -> str:
    """The gate the refusal's hint names: `min_decision_agreement` replaced by what it says."""
    found = re.search(r"replace `min_decision_agreement` by `([^`]+)`", message)
    assert found is not None, message
    return re.sub(r"min_decision_agreement: [0-9.]+", found.group(1), gate)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Outputs files of FP32 and both INT8 builds on the 8 pages, as infer stores them."""
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    folder = tmp_path_factory.mktemp("maps")
    project(folder, OLD)

    class Pages(CalibrationDataReader):
        def __init__(self, name: str) -> None:
            self.rows = iter({"page": x[None]} for x in np.load(folder / name)["x"])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.rows, None)

    models = {"fp32": folder / "map.onnx"}
    for name in ("text", "blank"):
        models[name] = folder / f"{name}.onnx"
        quantize_static(str(folder / "map.onnx"), str(models[name]), Pages(f"{name}.npz"),
                        quant_format=QuantFormat.QDQ)
    test = np.load(folder / "pages.npz")["x"]
    found = {}
    for name, model in models.items():
        run = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run
        found[name] = folder / f"{name}.npz"
        np.savez(found[name], **{"output:map": np.concatenate(  # type: ignore[arg-type]
            [run(None, {"page": x[None]})[0] for x in test])})
    return found


def judged(recipe: Path, builds: dict[str, Path], build: str) -> Any:
    (gate,) = load_recipe(recipe).recipe.targets[f"int8-{build}"].gates.accuracy_gates
    return judge(gate, builds[build], builds["fp32"])


def test_agreement_on_a_sparse_map_is_refused_and_its_hint_gates_the_region(
        tmp_path: Path, builds: dict[str, Path]) -> None:
    nothing = judged(project(tmp_path, OLD), builds, "blank")
    assert nothing.measured["decision_agreement"] > 97  # what used to pass it
    assert nothing.measured["reference_positive"] < 5
    assert not nothing and "refused: FP32 is above threshold 0.4 on 2.21 %" in nothing.message
    assert nothing.details["refused"] is True
    # The refusal is for agreement itself: the faithful build is refused too.
    assert not judged(project(tmp_path, OLD), builds, "text")
    fixed = hinted(nothing.message, OLD)
    for gate in (fixed, fixed[:-1] + ", peak_threshold: 0.7}"):  # EasyOCR's two thresholds
        lost = judged(project(tmp_path, gate), builds, "blank")  # validate accepts it
        assert not lost and lost.measured["region_recall"] == 0.0, lost.message
        assert "failed: region_recall 0 < 95" in lost.message
        # The message names the build's peak (its INT8 value differs between CPUs' kernels).
        assert f"the build's map peaks at {lost.measured['peak']:.3g}" in lost.message
        assert lost.measured["peak"] < 0.4
        kept = judged(project(tmp_path, gate), builds, "text")
        assert kept and kept.measured["region_recall"] == 100.0, kept.message
        assert kept.measured["region_iou"] > 95


@pytest.mark.slow
def test_the_region_gate_through_the_pipeline(tmp_path: Path) -> None:
    """`edgebuild run` builds both INT8 targets with the quantize pass: the old gate is
    refused on both, and the hint's gate re-run (from the cache) fails the build
    calibrated on blank pages only."""
    from edgebuild import api

    options = api.RunOptions(out=tmp_path / "out", cache_dir=tmp_path / "cache")
    report = api.run(project(tmp_path, OLD), options)
    gates = {t.name: g for t in report.targets for g in t.gates}
    assert report.exit_code == 1 and all("refused" in g.message for g in gates.values())
    # The gate cannot judge the output: no layer of the build is blamed for that.
    assert not any("diverges" in g.message for g in gates.values()), gates
    report = api.run(project(tmp_path, hinted(gates["int8-blank"].message, OLD)), options)
    gates = {t.name: g for t in report.targets for g in t.gates}
    assert gates["int8-text"], gates["int8-text"].message
    assert not gates["int8-blank"]
    assert gates["int8-blank"].measured["region_recall"] == 0.0
