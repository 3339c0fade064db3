"""The quantize pass's quality levers as options: validation, and a full run of each on a
MobileNet-style block (fast); the accuracy-aware search finds the fewest float layers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from pydantic import ValidationError

from edgebuild.core.op import StageContext
from edgebuild.execute.worker import context_from_recipe
from edgebuild.passes.quantize import Quantize
from edgebuild.quant.params import QuantizeParams
from tests.conftest import REPO
from tests.integration.passes import mbconv
from tests.integration.passes.conftest import as_artifact

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize(("params", "message"), [
    ({"mode": "dynamic", "bias_correction": True}, "bias_correction needs mode static"),
    ({"mode": "dynamic", "reduce_range": "auto"}, "reduce_range auto needs mode static"),
    ({"mode": "fp16", "equalize": {}}, "equalize.clip exact needs `calibration"),
    ({"mode": "static", "calibration": "c", "equalize": {"clip": "both"}}, "clip"),
    ({"mode": "static", "calibration": "c", "ort_extra_options": {"WeightSymmetric": False}},
     r"ort_extra_options \['WeightSymmetric'\] are not passed through"),
    ({"mode": "static", "calibration": "c", "equalize": {"iterations": 3}}, "iterations"),
])
def test_invalid_options_are_rejected(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        QuantizeParams.model_validate(params)


def test_relu_equalization_needs_no_calibration() -> None:
    p = QuantizeParams.model_validate({"mode": "dynamic", "equalize": {"clip": "relu"}})
    assert p.equalize is not None and p.equalize.max_iterations == 20


def context(tmp_path: Path, name: str) -> StageContext:
    source = tmp_path / "source" / "model.onnx"
    if not source.exists():
        source.parent.mkdir()
        mbconv.build(source)
    data = tmp_path / "calibration.npz"
    if not data.exists():
        np.savez(data, x=mbconv.inputs(24, seed=1))
        np.savez(tmp_path / "evaluation.npz", x=mbconv.inputs(24, seed=2))
    recipe = {"inputs": [{"name": "x", "shape": [1, mbconv.C_IN, mbconv.SIZE, mbconv.SIZE],
                          "dtype": "float32", "dynamic_axes": {}}],
              "outputs": ["logits"],
              "datasets": {"calib": {"kind": "npz", "path": str(data)},
                           "eval": {"kind": "npz", "path": str(tmp_path / "evaluation.npz")}}}
    out = tmp_path / name
    out.mkdir()
    model = as_artifact(source.parent, "onnx", "model.onnx")
    return context_from_recipe(name, {"model": model}, out, recipe, REPO / "recipes")


def quantize(tmp_path: Path, name: str, **params: Any) -> tuple[Path, dict[str, Any]]:
    ctx = context(tmp_path, name)
    result = Quantize().run(ctx, QuantizeParams(mode="static", calibration="calib", **params))
    return ctx.out / result.main, result.metadata


def test_every_lever_runs_and_reports_what_it_did(tmp_path: Path) -> None:
    path, meta = quantize(tmp_path, "all", equalize={"clip": "exact"}, bias_correction=True,
                          reduce_range="auto", keep_activations=True, dedicated_qdq_pair=True,
                          ort_extra_options={"ForceQuantizeNoInputCheck": True})
    assert meta["equalize"]["pairs"] == 2 and meta["equalize"]["fp32_top1_agreement"] == 100
    assert meta["equalize"]["fp32_max_abs_diff"] < 1e-3
    assert meta["bias_correction"]["layers"] == 4
    assert set(meta["reduce_range_auto"]["overflow_rate"]) == {"expand", "project", "head"}
    assert meta["float_layers_guarded"] == []
    # keep_activations: the Clips stay in the graph as their own nodes
    assert sum(n.op_type == "Clip" for n in onnx.load(str(path)).graph.node) == 2
    assert [p.name for p in path.parent.iterdir()] == ["model.onnx"], "no work files"


def test_excluded_layers_are_guarded_and_reported(tmp_path: Path) -> None:
    _, meta = quantize(tmp_path, "ex", exclude_nodes=["depthwise", "head"])
    assert sorted(meta["float_layers_guarded"]) == ["depthwise", "head"]


def test_accuracy_aware_finds_the_fewest_float_layers_by_bisection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Doubling overshoots (1, 2, 4, 8); bisection comes back to the smallest count that
    meets the budget (5 here), and the model shipped is that step's."""
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.prepared import Prepared
    from edgebuild.quant.search import accuracy_aware, sensitivity

    # The search's own names are patched (accuracy_aware.quantize_prepared): sensitivity
    # and the rest of the wing keep the real quantize_prepared for every later test.
    needed = 5
    ranking = [(f"n{i}", 1.0 - i / 10) for i in range(10)]
    built: list[int] = []

    def fake_quantize(prepared: Any, destination: Path, p: Any, calibration: Any,
                      exclude: list[str], scratch: Path, only: Any = None) -> None:
        built.append(len(exclude))
        destination.write_text(str(len(exclude)))

    monkeypatch.setattr(accuracy_aware, "quantize_prepared", fake_quantize)
    monkeypatch.setattr(sensitivity, "isolated_sensitivity", lambda *a, **k: ranking)
    monkeypatch.setattr(accuracy_aware, "outputs", lambda path, samples: np.zeros((1, 2)))
    monkeypatch.setattr(accuracy_aware, "drop", lambda reference, candidate, labels, metric:
                        0.0 if built[-1] >= needed else 10.0)
    p = QuantizeParams(mode="static", calibration="c",
                       accuracy_aware={"dataset": "e", "max_drop": 1, "max_iterations": 12})
    prepared = Prepared(tmp_path / "m.onnx", tmp_path / "m.onnx")
    calibration = Samples({"x": np.zeros((1, 1))}, None, ["-"])
    meta = accuracy_aware.accuracy_aware(prepared, tmp_path / "out.onnx", p, calibration,
                                         calibration, tmp_path)
    assert [s["kept_in_float"] for s in meta["steps"]] == [0, 1, 2, 4, 8, 6, 5]
    assert meta["kept_in_float"] == ["n0", "n1", "n2", "n3", "n4"]
    assert (tmp_path / "out.onnx").read_text() == "5"


def test_sensitivity_quantizes_a_conv_with_its_folded_activation(tmp_path: Path) -> None:
    from edgebuild.quant.search.sensitivity import fused_activations

    graph = onnx.load(str(mbconv.build(tmp_path / "m.onnx"))).graph
    assert fused_activations(graph) == {"expand": ["expand_clip"],
                                        "depthwise": ["depthwise_clip"]}


def test_version_was_bumped() -> None:
    assert Quantize.version >= 4
