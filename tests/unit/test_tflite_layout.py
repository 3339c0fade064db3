"""How recipe (ONNX, NCHW) tensors map onto a TFLite model's, and the implicit onnx2tf step."""

from __future__ import annotations

import pytest

from edgebuild.backends.tflite.backend import TfliteOptions, _inverse, _layout_perm, _match
from edgebuild.errors import StageError
from edgebuild.plan.planner import implicit_path
from edgebuild.registry import conversions


def test_nchw_input_maps_to_nhwc() -> None:
    assert _layout_perm([1, 3, 224, 224], [1, 224, 224, 3], channels_last=True) == [0, 2, 3, 1]
    assert _layout_perm(["batch", 1, 28, 28], [1, 28, 28, 1], channels_last=True) == [0, 2, 3, 1]


def test_same_shape_is_identity_unless_channels_last_says_otherwise() -> None:
    assert _layout_perm([1, 1000], [1, 1000], channels_last=True) is None
    assert _layout_perm([1, 3, 224, 224], [1, 3, 224, 224], channels_last=False) is None
    # A square tensor is ambiguous by shape alone: the recorded layout decides.
    assert _layout_perm([1, 4, 4, 4], [1, 4, 4, 4], channels_last=True) == [0, 2, 3, 1]
    assert _layout_perm([1, 4, 4, 4], [1, 4, 4, 4], channels_last=False) is None


def test_unmappable_shape_is_a_stage_error() -> None:
    with pytest.raises(StageError, match="neither the ONNX shape"):
        _layout_perm([1, 3, 224, 224], [1, 150528], channels_last=True)


def test_inverse_undoes_the_permutation() -> None:
    assert _inverse([0, 2, 3, 1]) == [0, 3, 1, 2]
    assert _inverse(None) is None


def test_names_match_by_name_then_by_position() -> None:
    assert _match(["image"], ["image"]) == {"image": "image"}
    assert _match(["input.1"], ["input_1"]) == {"input.1": "input_1"}
    with pytest.raises(StageError):
        _match(["a", "b"], ["a"])


def test_calibrated_precisions_need_a_dataset() -> None:
    with pytest.raises(ValueError, match="calibration_dataset"):
        TfliteOptions.model_validate({"precision": "int8"})
    with pytest.raises(ValueError, match="io_type"):
        TfliteOptions.model_validate({"precision": "float16", "io_type": "uint8"})
    assert TfliteOptions.model_validate(
        {"precision": "int8", "io_type": "uint8", "calibration_dataset": "photos"})


def test_planner_reaches_a_savedmodel_through_onnx2tf() -> None:
    table = conversions()  # export-onnx, and what the installed backends contribute
    assert implicit_path("onnx", ("tf-savedmodel",), table) == ["onnx-to-tf"]
    assert implicit_path("pytorch", ("tf-savedmodel",), table) == ["export-onnx", "onnx-to-tf"]
    assert implicit_path("onnx", ("onnx",), table) == []
    assert implicit_path("tflite", ("onnx",), table) is None
