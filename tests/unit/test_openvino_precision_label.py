"""The OpenVINO precision label: what the report says ran, from what the plugin read back.
Pure string logic (edgebuild/backends/openvino/ir.py imports no openvino at module level);
tests/integration/openvino/test_precision.py reads the facts from a real compiled model."""

from __future__ import annotations

from edgebuild.backends.openvino.ir import precision_label

AVX2 = ["FP32", "INT8", "BIN"]  # OPTIMIZATION_CAPABILITIES of the AVX2-only AMD EPYC
AMX = ["WINOGRAD", "FP32", "BF16", "FP16", "INT8", "BIN"]


def test_an_honoured_f32_is_just_f32() -> None:
    assert precision_label("f32", "f32", {"f32": 14}, AVX2) == ("f32", True)


def test_a_hint_the_cpu_cannot_honour_says_why_and_what_ran() -> None:
    label, honoured = precision_label("bf16", "f32", {"f32": 14}, AVX2)
    assert label == ("bf16 requested; this CPU has no native bf16 (OpenVINO CPU "
                     "capabilities: FP32, INT8, BIN): ran as f32 (layers: f32 14)")
    assert not honoured
    label, _ = precision_label("f16", "f32", {"f32": 3}, AVX2)
    assert label.startswith("f16 requested; this CPU has no native f16 (")


def test_no_native_claim_without_the_capabilities_to_show_it() -> None:
    label, honoured = precision_label("f16", "f32", {"f32": 3}, AMX)
    assert label == "f16 requested; OpenVINO did not apply it: ran as f32 (layers: f32 3)"
    assert not honoured
    assert "no native" not in precision_label("bf16", "f32", {"f32": 3}, [])[0]


def test_a_native_bf16_lists_layers_left_in_another_precision() -> None:
    assert precision_label("bf16", "bf16", {"bf16": 90, "f32": 13}, AMX) == (
        "bf16 (layers: bf16 90, f32 13)", True)
    assert precision_label("bf16", "bf16", {"bf16": 90}, AMX) == ("bf16", True)


def test_int8_layers_of_a_quantized_model_show() -> None:
    assert precision_label("f32", "f32", {"f32": 4, "u8": 10}, AVX2) == (
        "f32 (layers: f32 4, u8 10)", True)


def test_the_device_default_says_what_it_picked_here() -> None:
    assert precision_label("default", "bf16", {"bf16": 5}, AMX) == (
        "OpenVINO's default (no precision hint): ran as bf16 on this CPU (layers: bf16 5)",
        True)
    assert precision_label("default", "f32", {}, AVX2, "GPU")[0] == (
        "OpenVINO's default (no precision hint): ran as f32 on this GPU")
