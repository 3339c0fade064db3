"""The JSON dump of `QuantizeParams` is in every quantize stage's cache key (the planner
validates the recipe's params and keys their `model_dump(mode="json")`, with
`Quantize.version`). These dumps are what the code wrote before the INT8 wing moved
to edgebuild/quant/ (main at af886c6): a change of a field's name, order or default
would silently rebuild every user's cached INT8 stages. Change a pin only together
with `Quantize.version`, on purpose.

DEFAULTS pins every field's name, order and default; CHANGED, what each other
configuration dumps differently (in the defaults' order, so the expected text is
exactly the dump's)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from edgebuild.passes.quantize import Quantize
from edgebuild.quant.params import QuantizeParams

CASES: dict[str, dict[str, Any]] = {
    "static_defaults": {"mode": "static", "calibration": "calib"},
    "preset_tensorrt": {"preset": "tensorrt", "calibration": "calib"},
    "preset_transformer_dynamic": {"mode": "dynamic", "preset": "transformer"},
    "aimet_adaround": {"mode": "static", "calibration": "calib", "engine": "aimet",
                       "weight_rounding": "adaround", "adaround_iterations": 500},
    "budget": {"mode": "static", "calibration": "calib", "budget": {"gate": {
        "dataset": "photos", "min_cosine": 0.995, "min_decided_agreement": 99, "margin": 0.2}}},
    "levers": {"mode": "static", "calibration": "calib", "method": "entropy",
               "reduce_range": "auto", "bias_correction": True, "equalize": {"clip": "exact"},
               "exclude_nodes": ["a", "b"], "keep_float": "none", "mixed_range_bound": None},
    "accuracy_aware": {"mode": "static", "calibration": "calib",
                       "accuracy_aware": {"dataset": "val", "max_drop": 0.5}},
    "fp16": {"mode": "fp16"},
    "corrected_float": {"mode": "static", "calibration": "calib", "activation_type": "int8",
                        "bias_correction": True, "emit": "corrected-float"},
}

DEFAULTS = (
    '{"preset": null, "mode": "static", "engine": "onnxruntime", "weight_rounding": "nearest", '
    '"adaround_iterations": 1000, "seq_mse_candidates": 20, "calibration": "calib", '
    '"calibration_samples": 100, "method": "minmax", "percentile": 99.999, "per_channel": true, '
    '"activation_type": "uint8", "weight_type": "int8", "activation_symmetric": false, '
    '"weight_symmetric": true, "reduce_range": false, "saturation_tolerance": 1e-05, '
    '"op_types": null, "exclude_nodes": [], "keep_float": "auto", "mixed_range_bound": 16.0, '
    '"keep_io_fp32": true, "equalize": null, "bias_correction": false, '
    '"keep_activations": false, "dedicated_qdq_pair": false, "ort_extra_options": {}, '
    '"accuracy_aware": null, "budget": null, "compare_samples": 4, "emit": "qdq"}')

CHANGED: dict[str, str] = {
    "preset_tensorrt": (
        '{"preset": "tensorrt", "activation_type": "int8", "activation_symmetric": true, '
        '"op_types": ["Conv", "ConvTranspose", "Gemm", "MatMul"]}'),
    "preset_transformer_dynamic": (
        '{"preset": "transformer", "mode": "dynamic", "calibration": null, '
        '"op_types": ["MatMul", "Gemm"]}'),
    "aimet_adaround": (
        '{"engine": "aimet", "weight_rounding": "adaround", "adaround_iterations": 500}'),
    "budget": (
        '{"budget": {"gate": {"dataset": "photos", "min_decided_agreement": 99.0, "margin": 0.2, '
        '"min_cosine": 0.995}, "steps": ["percentile", "entropy", "reduce_range", '
        '"bias_correction", "equalize", "keep_float"], "max_iterations": 8, '
        '"max_seconds": 1800.0}}'),
    "levers": (
        '{"method": "entropy", "reduce_range": "auto", "exclude_nodes": ["a", "b"], '
        '"keep_float": "none", "mixed_range_bound": null, "equalize": {"clip": "exact", '
        '"max_iterations": 20}, "bias_correction": true}'),
    "accuracy_aware": (
        '{"accuracy_aware": {"dataset": "val", "metric": "top1_agreement", "max_drop": 0.5, '
        '"max_iterations": 8, "max_seconds": 600.0}}'),
    "fp16": (
        '{"mode": "fp16", "calibration": null}'),
    "corrected_float": (
        '{"activation_type": "int8", "bias_correction": true, "emit": "corrected-float"}'),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_params_dump_is_the_one_cached_builds_were_keyed_by(case: str) -> None:
    dumped = QuantizeParams.model_validate(CASES[case]).model_dump(mode="json")
    expected = DEFAULTS if case == "static_defaults" else \
        json.dumps({**json.loads(DEFAULTS), **json.loads(CHANGED[case])})
    assert json.dumps(dumped) == expected


def test_the_op_version_is_the_one_cached_builds_were_keyed_by() -> None:
    assert Quantize.version == 10
    assert Quantize.Params is QuantizeParams
