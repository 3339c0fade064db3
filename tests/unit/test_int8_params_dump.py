"""The INT8 option sets' JSON dumps, pinned to what main wrote at af886c6 (before the
INT8 wing moved to edgebuild/quant/).

A stage's cache key holds its params as the recipe wrote them, with the op's version
(plan/planner.py, cache/keys.py): a changed default therefore changes what an unchanged
recipe computes WITHOUT changing its key, and a cache would hand back the old result. So
a default, a field's name or its meaning changes only together with the owner's version
(the quantize and openvino-quantize ops' `version`, the TFLite and QNN backends'), on
purpose: these pins fail first. The four share fields (calibration, per_channel,
keep_float, exclude_nodes, mixed_range_bound): a shared typed scheme must leave all four
dumps as they are.

DEFAULTS pins each owner's fields with their defaults; CHANGED, what every other
configuration dumps differently. Compared as the key sees them: canonical JSON, with
sorted keys (core/digest.py), so field order is not part of the pin."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from edgebuild.passes.quantize import Quantize
from edgebuild.quant.params import QuantizeParams
from edgebuild.registry import backend_class, load_op


def model(owner: str) -> type[BaseModel]:
    """The params (an op) or options (a backend) class, wherever its module lives."""
    if owner in ("quantize", "openvino-quantize"):
        return load_op(owner).Params
    return backend_class(owner).Options


CASES: dict[tuple[str, str], dict[str, Any]] = {
    ("quantize", "static_defaults"): {"mode": "static", "calibration": "calib"},
    ("quantize", "preset_tensorrt"): {"preset": "tensorrt", "calibration": "calib"},
    ("quantize", "preset_transformer_dynamic"): {"mode": "dynamic", "preset": "transformer"},
    ("quantize", "aimet_adaround"): {"mode": "static", "calibration": "calib", "engine": "aimet",
                                     "weight_rounding": "adaround", "adaround_iterations": 500},
    ("quantize", "budget"): {"mode": "static", "calibration": "calib", "budget": {"gate": {
        "dataset": "photos", "min_cosine": 0.995, "min_decided_agreement": 99, "margin": 0.2}}},
    ("quantize", "levers"): {"mode": "static", "calibration": "calib", "method": "entropy",
                             "reduce_range": "auto", "bias_correction": True,
                             "equalize": {"clip": "exact"}, "exclude_nodes": ["a", "b"],
                             "keep_float": "none", "mixed_range_bound": None},
    ("quantize", "accuracy_aware"): {"mode": "static", "calibration": "calib",
                                     "accuracy_aware": {"dataset": "val", "max_drop": 0.5}},
    ("quantize", "fp16"): {"mode": "fp16"},
    ("quantize", "corrected_float"): {"mode": "static", "calibration": "calib",
                                      "activation_type": "int8", "bias_correction": True,
                                      "emit": "corrected-float"},
    ("tflite", "defaults"): {},
    ("tflite", "int8"): {"precision": "int8", "calibration_dataset": "calib",
                         "calibration_samples": 50, "per_channel": False, "keep_float": "none",
                         "exclude_nodes": ["head"], "mixed_range_bound": None,
                         "io_type": "uint8"},
    ("qnn", "int8"): {"calibration_dataset": "calib"},
    ("qnn", "int16"): {"precision": "int16", "calibration_dataset": "calib",
                       "calibration_samples": 20, "per_channel": False, "keep_float": "none",
                       "mixed_range_bound": 32},
    ("qnn", "qdq"): {"precision": "qdq"},
    ("openvino-quantize", "defaults"): {"dataset": "calib"},
    ("openvino-quantize", "accuracy_control"): {"dataset": "calib", "subset_size": 64,
                                                "preset": "mixed", "mode": "accuracy-control",
                                                "keep_float": "none", "mixed_range_bound": None,
                                                "ignored_nodes": ["head"], "max_drop": 0.5},
}

DEFAULTS: dict[str, str] = {
    "quantize": (
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
    "tflite": (
        '{"precision": "float32", "io_type": "float32", "calibration_dataset": null, '
        '"calibration_samples": 100, "per_channel": true, "keep_float": "auto", '
        '"exclude_nodes": [], "mixed_range_bound": 16.0, "delegate": "xnnpack", '
        '"delegate_fallback": "builtin", "android_api_level": 30, "latency_on": "device", '
        '"device_serial": null, "benchmark_model": null}'),
    "qnn": (
        '{"precision": "int8", "calibration_dataset": "calib", "calibration_samples": 100, '
        '"per_channel": true, "keep_float": "auto", "mixed_range_bound": 16.0, "soc_model": 43, '
        '"htp_arch": 73, "htp_performance_mode": "burst", "vtcm_mb": null, '
        '"cpu_fallback": "fail", "device_serial": null}'),
    "openvino-quantize": (
        '{"dataset": "calib", "subset_size": 300, "preset": "performance", '
        '"target_device": "CPU", "fast_bias_correction": true, "model_type": null, '
        '"mode": "default", "keep_float": "auto", "mixed_range_bound": 16.0, '
        '"ignored_nodes": [], "validation_dataset": null, "max_drop": null, '
        '"max_iterations": null, "max_seconds": null, "ranking_subset_size": null}'),
}

CHANGED: dict[tuple[str, str], str] = {
    ("quantize", "preset_tensorrt"): (
        '{"preset": "tensorrt", "activation_type": "int8", "activation_symmetric": true, '
        '"op_types": ["Conv", "ConvTranspose", "Gemm", "MatMul"]}'),
    ("quantize", "preset_transformer_dynamic"): (
        '{"preset": "transformer", "mode": "dynamic", "calibration": null, '
        '"op_types": ["MatMul", "Gemm"]}'),
    ("quantize", "aimet_adaround"): (
        '{"engine": "aimet", "weight_rounding": "adaround", "adaround_iterations": 500}'),
    ("quantize", "budget"): (
        '{"budget": {"gate": {"dataset": "photos", "min_decided_agreement": 99.0, "margin": 0.2, '
        '"min_cosine": 0.995}, "steps": ["percentile", "entropy", "reduce_range", '
        '"bias_correction", "equalize", "keep_float"], "max_iterations": 8, '
        '"max_seconds": 1800.0}}'),
    ("quantize", "levers"): (
        '{"method": "entropy", "reduce_range": "auto", "exclude_nodes": ["a", "b"], '
        '"keep_float": "none", "mixed_range_bound": null, "equalize": {"clip": "exact", '
        '"max_iterations": 20}, "bias_correction": true}'),
    ("quantize", "accuracy_aware"): (
        '{"accuracy_aware": {"dataset": "val", "metric": "top1_agreement", "max_drop": 0.5, '
        '"max_iterations": 8, "max_seconds": 600.0}}'),
    ("quantize", "fp16"): (
        '{"mode": "fp16", "calibration": null}'),
    ("quantize", "corrected_float"): (
        '{"activation_type": "int8", "bias_correction": true, "emit": "corrected-float"}'),
    ("tflite", "int8"): (
        '{"precision": "int8", "io_type": "uint8", "calibration_dataset": "calib", '
        '"calibration_samples": 50, "per_channel": false, "keep_float": "none", '
        '"exclude_nodes": ["head"], "mixed_range_bound": null}'),
    ("qnn", "int16"): (
        '{"precision": "int16", "calibration_samples": 20, "per_channel": false, '
        '"keep_float": "none", "mixed_range_bound": 32.0}'),
    ("qnn", "qdq"): (
        '{"precision": "qdq", "calibration_dataset": null}'),
    ("openvino-quantize", "accuracy_control"): (
        '{"subset_size": 64, "preset": "mixed", "mode": "accuracy-control", '
        '"keep_float": "none", "mixed_range_bound": null, "ignored_nodes": ["head"], '
        '"max_drop": 0.5}'),
}


@pytest.mark.parametrize(("owner", "case"), sorted(CASES))
def test_dump_is_the_one_cached_builds_were_keyed_by(owner: str, case: str) -> None:
    dumped = model(owner).model_validate(CASES[owner, case]).model_dump(mode="json")
    expected = DEFAULTS[owner] if (owner, case) not in CHANGED else \
        json.dumps({**json.loads(DEFAULTS[owner]), **json.loads(CHANGED[owner, case])})
    # As the key reads it: canonical JSON, keys sorted (core/digest.py), so the order of
    # the fields is not pinned (TFLite's runtime fields moved to a shared base model).
    assert dumped == json.loads(expected)


def test_the_versions_are_the_ones_cached_builds_were_keyed_by() -> None:
    assert Quantize.version == 10
    assert Quantize.Params is QuantizeParams
    assert load_op("openvino-quantize").version == 4
