"""The quantize pass's `emit: corrected-float` (the bias-corrected float model for TFLite):
what it needs, checked when the recipe is validated (nothing is built)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from edgebuild.quant.params import QuantizeParams

TFLITE = {"mode": "static", "calibration": "calib", "bias_correction": True,
          "activation_type": "int8", "emit": "corrected-float"}


def params(**changes: Any) -> QuantizeParams:
    return QuantizeParams.model_validate({**TFLITE, **changes})


def test_default_is_the_qdq_model() -> None:
    assert QuantizeParams.model_validate({"mode": "static", "calibration": "c"}).emit == "qdq"


def test_corrected_float_for_tflite_validates() -> None:
    p = params(exclude_nodes=["/_conv_stem/Conv_output_0"])
    assert p.emit == "corrected-float" and p.bias_correction and p.per_channel


@pytest.mark.parametrize(("changes", "message"), [
    ({"bias_correction": False}, "bias_correction: true"),
    ({"mode": "dynamic", "calibration": None}, "mode static"),
    ({"engine": "aimet", "activation_type": "uint8"}, "engine onnxruntime"),
    ({"accuracy_aware": {"dataset": "photos"}}, "no budget / accuracy_aware"),
    ({"budget": {"gate": {"dataset": "photos", "min_cosine": 0.995}}},
     "no budget / accuracy_aware"),
    ({"equalize": {"clip": "relu"}}, "no equalize"),
])
def test_corrected_float_refuses_what_it_cannot_emit(changes: dict[str, Any],
                                                     message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        params(**changes)


def test_unknown_emit_is_refused() -> None:
    with pytest.raises(ValidationError):
        params(emit="float")
