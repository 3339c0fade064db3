"""A YOLOv8-style single head `[1, 4+C, N]` (tests/models/yolo_head_gate.py), exported through
the pipeline: its score block is gated on its own, a whole-output cosine is refused, and
no gate of the new kind passes the head with its class scores zeroed (issue 31)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import edgebuild, load_module

torch = pytest.importorskip("torch", reason="the test model is a PyTorch module")
pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytestmark = pytest.mark.onnxruntime

MODEL = Path(__file__).resolve().parents[2] / "models" / "yolo_head_gate.py"
RECIPE = f"""\
name: yolo-head
model: {{factory: "{MODEL}:build"}}
inputs: [{{name: images, shape: [1, 3, 320, 320]}}]
outputs: [output0]
datasets:
  photos: {{kind: npz, path: photos.npz}}
passes: [export-onnx: {{opset: 17}}]
targets:
  host-cpu:
    gates:
      accuracy:
        - {{dataset: photos, output: output0, slice: {{axis: 1, stop: 4}}, task: regression,
           max_relative_error: 0.001}}
        - {{dataset: photos, output: output0, slice: {{axis: 1, start: 4}}, task: regression,
           min_cosine: 0.999}}
        - {{dataset: photos, output: output0, task: regression, channel_axis: 1,
           min_cosine: 0.999}}
"""


def _module() -> Any:
    return load_module(MODEL)


def head_outputs() -> np.ndarray:
    module = _module()
    model, photos = module.build(), module.photos()
    with torch.no_grad():
        return np.concatenate([model(photos[i:i + 1]).numpy() for i in range(len(photos))])


@pytest.mark.slow
def test_slices_and_channels_of_a_real_head_through_the_pipeline(tmp_path: Path) -> None:
    np.savez(tmp_path / "photos.npz", x=_photos())
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    gates = {g["gate"]: g for t in json.loads((tmp_path / "out" / "report.json").read_text())
             ["targets"] for g in t["gates"]}
    assert set(gates) == {"accuracy[output0[:, :4]]", "accuracy[output0[:, 4:]]",
                          "accuracy[output0]"}
    assert gates["accuracy[output0[:, 4:]]"]["measured"]["cosine"] > 0.999
    assert gates["accuracy[output0]"]["measured"]["channels"] == 7


def _photos() -> np.ndarray:
    return np.asarray(_module().photos().numpy())


def test_no_new_gate_passes_the_head_with_its_scores_zeroed(tmp_path: Path) -> None:
    from edgebuild.fidelity import verdict
    from edgebuild.fidelity.metrics import value_metrics
    from edgebuild.recipe.models import AccuracyGate

    good = head_outputs()
    broken = good.copy()
    broken[:, 4:] = 0  # what one INT8 scale for the output Concat did on ONNX Runtime
    assert good.shape == (4, 7, 64) and good[:, :4].max() > 100 and good[:, 4:].max() < 1
    np.savez(tmp_path / "ref.npz", **{"output:output0": good})  # type: ignore[arg-type]
    np.savez(tmp_path / "got.npz", **{"output:output0": broken})  # type: ignore[arg-type]

    def judge(**gate: Any) -> Any:
        return verdict.judge(AccuracyGate(
            dataset="photos", output="output0", task="regression", **gate),
            tmp_path / "got.npz", tmp_path / "ref.npz")

    # The motivating case: the old gate, `min_cosine: 0.995` on the raw head, passed.
    assert value_metrics(broken, good)["cosine"] > 0.995
    assert judge(min_cosine=0.995, channel_axis="whole")  # kept only when asked for
    # Now: refused on the whole head, failed on the score slice and per channel.
    refused = judge(min_cosine=0.995)
    assert not refused and "mixes ranges along axis 1" in refused.message
    assert not judge(min_cosine=0.995, slice={"axis": 1, "start": 4})
    assert not judge(min_cosine=0.995, channel_axis=1)
    assert not judge(max_relative_error=0.05, channel_axis=1)
    # The boxes are intact, and their own gate says so.
    assert judge(max_relative_error=1e-6, slice={"axis": 1, "stop": 4})
