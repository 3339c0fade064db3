"""The fidelity budget's params, and a recipe that shares the target's gate
with the budget through a YAML anchor (validation only: nothing is built)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from edgebuild.errors import RecipeError
from edgebuild.quant.params import DEFAULT_STEPS, QuantizeParams
from edgebuild.recipe.loader import load_recipe

GATE = {"dataset": "photos", "min_cosine": 0.995, "min_decided_agreement": 99, "margin": 0.2}


def params(**budget: object) -> QuantizeParams:
    return QuantizeParams.model_validate({"mode": "static", "calibration": "calib",
                                          "budget": {"gate": GATE, **budget}})


def test_default_ladder_is_cheapest_first_and_keep_float_last() -> None:
    p = params()
    assert p.budget is not None and tuple(p.budget.steps) == DEFAULT_STEPS
    assert p.budget.steps[-1] == "keep_float"
    assert p.budget.gate.margin == 0.2


def test_budget_params_are_checked() -> None:
    with pytest.raises(ValidationError, match="keep_float must be the last"):
        params(steps=["keep_float", "entropy"])
    with pytest.raises(ValidationError, match="names a step twice"):
        params(steps=["entropy", "entropy"])
    with pytest.raises(ValidationError):
        params(steps=["ada_round"])
    with pytest.raises(ValidationError, match="go together"):
        QuantizeParams.model_validate({"mode": "static", "calibration": "c", "budget": {
            "gate": {"dataset": "p", "min_decided_agreement": 99}}})
    with pytest.raises(ValidationError, match="needs mode static"):
        QuantizeParams.model_validate({"mode": "dynamic", "budget": {"gate": GATE}})
    with pytest.raises(ValidationError, match="use budget"):
        QuantizeParams.model_validate({"mode": "static", "calibration": "c",
                                       "budget": {"gate": GATE},
                                       "accuracy_aware": {"dataset": "p"}})


RECIPE = """\
name: demo
model: {onnx: m.onnx}
inputs: [{name: x, shape: [1, 4]}]
datasets:
  calib: {kind: npz, path: d.npz}
  photos: {kind: npz, path: e.npz}
targets:
  host-cpu-int8:
    profile: host-cpu
    passes:
      - quantize:
          mode: static
          calibration: calib
          budget: {gate: *faithful}
    gates:
      accuracy: &faithful {dataset: DATASET, min_cosine: 0.995, min_decided_agreement: 99,
                           margin: 0.2}
"""


def test_a_recipe_shares_the_targets_gate_with_the_budget(tmp_path: Path) -> None:
    # The anchor must come before its alias in the file: gates first, then passes.
    text = RECIPE.replace("DATASET", "photos")
    passes, gates = text.index("    passes:"), text.index("    gates:")
    text = text[:passes] + text[gates:] + text[passes:gates]
    path = tmp_path / "r.yaml"
    path.write_text(text)
    loaded = load_recipe(path)
    quantize = loaded.recipe.targets["host-cpu-int8"].passes[0]
    assert quantize.params["budget"]["gate"]["min_cosine"] == 0.995


def test_a_budget_gate_on_an_unknown_dataset_names_its_line(tmp_path: Path) -> None:
    text = RECIPE.replace("DATASET", "photoz")
    passes, gates = text.index("    passes:"), text.index("    gates:")
    text = text[:passes] + text[gates:] + text[passes:gates]
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    text_of = " ".join(str(p) for p in info.value.problems)
    assert "budget.gate.dataset" in text_of and "photoz" in text_of
