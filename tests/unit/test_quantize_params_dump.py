"""The JSON dump of `QuantizeParams` is in every quantize stage's cache key (the planner
validates the recipe's params and keys their `model_dump(mode="json")`, with
`Quantize.version`). These dumps are what the code wrote before the INT8 wing moved
to edgebuild/quant/ (main at af886c6): a change of a field's name, order or default
would silently rebuild every user's cached INT8 stages. Change a pin only together
with `Quantize.version`, on purpose."""

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

DUMPS: dict[str, str] = {
    "static_defaults": (
        '{"preset": null, "mode": "static", "engine": "onnxruntime", '
        '"weight_rounding": "nearest", "adaround_iterations": 1000, "seq_mse_candidates": 20, '
        '"calibration": "calib", "calibration_samples": 100, "method": "minmax", '
        '"percentile": 99.999, "per_channel": true, "activation_type": "uint8", '
        '"weight_type": "int8", "activation_symmetric": false, "weight_symmetric": true, '
        '"reduce_range": false, "saturation_tolerance": 1e-05, "op_types": null, '
        '"exclude_nodes": [], "keep_float": "auto", "mixed_range_bound": 16.0, '
        '"keep_io_fp32": true, "equalize": null, "bias_correction": false, '
        '"keep_activations": false, "dedicated_qdq_pair": false, "ort_extra_options": {}, '
        '"accuracy_aware": null, "budget": null, "compare_samples": 4, "emit": "qdq"}'),
    "preset_tensorrt": (
        '{"preset": "tensorrt", "mode": "static", "engine": "onnxruntime", '
        '"weight_rounding": "nearest", "adaround_iterations": 1000, "seq_mse_candidates": 20, '
        '"calibration": "calib", "calibration_samples": 100, "method": "minmax", '
        '"percentile": 99.999, "per_channel": true, "activation_type": "int8", '
        '"weight_type": "int8", "activation_symmetric": true, "weight_symmetric": true, '
        '"reduce_range": false, "saturation_tolerance": 1e-05, "op_types": ["Conv", '
        '"ConvTranspose", "Gemm", "MatMul"], "exclude_nodes": [], "keep_float": "auto", '
        '"mixed_range_bound": 16.0, "keep_io_fp32": true, "equalize": null, '
        '"bias_correction": false, "keep_activations": false, "dedicated_qdq_pair": false, '
        '"ort_extra_options": {}, "accuracy_aware": null, "budget": null, "compare_samples": 4, '
        '"emit": "qdq"}'),
    "preset_transformer_dynamic": (
        '{"preset": "transformer", "mode": "dynamic", "engine": "onnxruntime", '
        '"weight_rounding": "nearest", "adaround_iterations": 1000, "seq_mse_candidates": 20, '
        '"calibration": null, "calibration_samples": 100, "method": "minmax", '
        '"percentile": 99.999, "per_channel": true, "activation_type": "uint8", '
        '"weight_type": "int8", "activation_symmetric": false, "weight_symmetric": true, '
        '"reduce_range": false, "saturation_tolerance": 1e-05, "op_types": ["MatMul", "Gemm"], '
        '"exclude_nodes": [], "keep_float": "auto", "mixed_range_bound": 16.0, '
        '"keep_io_fp32": true, "equalize": null, "bias_correction": false, '
        '"keep_activations": false, "dedicated_qdq_pair": false, "ort_extra_options": {}, '
        '"accuracy_aware": null, "budget": null, "compare_samples": 4, "emit": "qdq"}'),
    "aimet_adaround": (
        '{"preset": null, "mode": "static", "engine": "aimet", "weight_rounding": "adaround", '
        '"adaround_iterations": 500, "seq_mse_candidates": 20, "calibration": "calib", '
        '"calibration_samples": 100, "method": "minmax", "percentile": 99.999, '
        '"per_channel": true, "activation_type": "uint8", "weight_type": "int8", '
        '"activation_symmetric": false, "weight_symmetric": true, "reduce_range": false, '
        '"saturation_tolerance": 1e-05, "op_types": null, "exclude_nodes": [], '
        '"keep_float": "auto", "mixed_range_bound": 16.0, "keep_io_fp32": true, '
        '"equalize": null, "bias_correction": false, "keep_activations": false, '
        '"dedicated_qdq_pair": false, "ort_extra_options": {}, "accuracy_aware": null, '
        '"budget": null, "compare_samples": 4, "emit": "qdq"}'),
    "budget": (
        '{"preset": null, "mode": "static", "engine": "onnxruntime", '
        '"weight_rounding": "nearest", "adaround_iterations": 1000, "seq_mse_candidates": 20, '
        '"calibration": "calib", "calibration_samples": 100, "method": "minmax", '
        '"percentile": 99.999, "per_channel": true, "activation_type": "uint8", '
        '"weight_type": "int8", "activation_symmetric": false, "weight_symmetric": true, '
        '"reduce_range": false, "saturation_tolerance": 1e-05, "op_types": null, '
        '"exclude_nodes": [], "keep_float": "auto", "mixed_range_bound": 16.0, '
        '"keep_io_fp32": true, "equalize": null, "bias_correction": false, '
        '"keep_activations": false, "dedicated_qdq_pair": false, "ort_extra_options": {}, '
        '"accuracy_aware": null, "budget": {"gate": {"dataset": "photos", '
        '"min_decided_agreement": 99.0, "margin": 0.2, "min_cosine": 0.995}, '
        '"steps": ["percentile", "entropy", "reduce_range", "bias_correction", "equalize", '
        '"keep_float"], "max_iterations": 8, "max_seconds": 1800.0}, "compare_samples": 4, '
        '"emit": "qdq"}'),
    "levers": (
        '{"preset": null, "mode": "static", "engine": "onnxruntime", '
        '"weight_rounding": "nearest", "adaround_iterations": 1000, "seq_mse_candidates": 20, '
        '"calibration": "calib", "calibration_samples": 100, "method": "entropy", '
        '"percentile": 99.999, "per_channel": true, "activation_type": "uint8", '
        '"weight_type": "int8", "activation_symmetric": false, "weight_symmetric": true, '
        '"reduce_range": "auto", "saturation_tolerance": 1e-05, "op_types": null, '
        '"exclude_nodes": ["a", "b"], "keep_float": "none", "mixed_range_bound": null, '
        '"keep_io_fp32": true, "equalize": {"clip": "exact", "max_iterations": 20}, '
        '"bias_correction": true, "keep_activations": false, "dedicated_qdq_pair": false, '
        '"ort_extra_options": {}, "accuracy_aware": null, "budget": null, "compare_samples": 4, '
        '"emit": "qdq"}'),
    "accuracy_aware": (
        '{"preset": null, "mode": "static", "engine": "onnxruntime", '
        '"weight_rounding": "nearest", "adaround_iterations": 1000, "seq_mse_candidates": 20, '
        '"calibration": "calib", "calibration_samples": 100, "method": "minmax", '
        '"percentile": 99.999, "per_channel": true, "activation_type": "uint8", '
        '"weight_type": "int8", "activation_symmetric": false, "weight_symmetric": true, '
        '"reduce_range": false, "saturation_tolerance": 1e-05, "op_types": null, '
        '"exclude_nodes": [], "keep_float": "auto", "mixed_range_bound": 16.0, '
        '"keep_io_fp32": true, "equalize": null, "bias_correction": false, '
        '"keep_activations": false, "dedicated_qdq_pair": false, "ort_extra_options": {}, '
        '"accuracy_aware": {"dataset": "val", "metric": "top1_agreement", "max_drop": 0.5, '
        '"max_iterations": 8, "max_seconds": 600.0}, "budget": null, "compare_samples": 4, '
        '"emit": "qdq"}'),
    "fp16": (
        '{"preset": null, "mode": "fp16", "engine": "onnxruntime", "weight_rounding": "nearest", '
        '"adaround_iterations": 1000, "seq_mse_candidates": 20, "calibration": null, '
        '"calibration_samples": 100, "method": "minmax", "percentile": 99.999, '
        '"per_channel": true, "activation_type": "uint8", "weight_type": "int8", '
        '"activation_symmetric": false, "weight_symmetric": true, "reduce_range": false, '
        '"saturation_tolerance": 1e-05, "op_types": null, "exclude_nodes": [], '
        '"keep_float": "auto", "mixed_range_bound": 16.0, "keep_io_fp32": true, '
        '"equalize": null, "bias_correction": false, "keep_activations": false, '
        '"dedicated_qdq_pair": false, "ort_extra_options": {}, "accuracy_aware": null, '
        '"budget": null, "compare_samples": 4, "emit": "qdq"}'),
    "corrected_float": (
        '{"preset": null, "mode": "static", "engine": "onnxruntime", '
        '"weight_rounding": "nearest", "adaround_iterations": 1000, "seq_mse_candidates": 20, '
        '"calibration": "calib", "calibration_samples": 100, "method": "minmax", '
        '"percentile": 99.999, "per_channel": true, "activation_type": "int8", '
        '"weight_type": "int8", "activation_symmetric": false, "weight_symmetric": true, '
        '"reduce_range": false, "saturation_tolerance": 1e-05, "op_types": null, '
        '"exclude_nodes": [], "keep_float": "auto", "mixed_range_bound": 16.0, '
        '"keep_io_fp32": true, "equalize": null, "bias_correction": true, '
        '"keep_activations": false, "dedicated_qdq_pair": false, "ort_extra_options": {}, '
        '"accuracy_aware": null, "budget": null, "compare_samples": 4, "emit": "corrected-float"}'),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_params_dump_is_the_one_cached_builds_were_keyed_by(case: str) -> None:
    dumped = QuantizeParams.model_validate(CASES[case]).model_dump(mode="json")
    assert json.dumps(dumped) == DUMPS[case]


def test_the_op_version_is_the_one_cached_builds_were_keyed_by() -> None:
    assert Quantize.version == 10
    assert Quantize.Params is QuantizeParams
