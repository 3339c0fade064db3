"""Pinning an ONNX model's dynamic input dimensions to the recipe's declared shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgebuild.errors import StageError


def pinned_shapes(model: Any, declared: list[dict[str, Any]],
                  what: str) -> dict[str, list[int]]:
    """The model's inputs with a dynamic dimension -> the recipe's declared example shape.

    Some targets take one shape per input (a .tflite model; a QNN context binary):
    left to their converters, a dynamic dimension becomes 1 (an image input of 1×1
    pixels that no real input fits) or keeps the graph off the accelerator, so every
    dynamic input is pinned to the shape the recipe builds and measures at.
    """
    shapes = {t["name"]: list(t["shape"]) for t in declared}
    pinned = {}
    for value in model.graph.input:
        name = value.name
        dims = [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
        if all(isinstance(d, int) and d > 0 for d in dims):
            continue
        if name not in shapes or len(shapes[name]) != len(dims):
            raise StageError(f"ONNX input '{name}' has dynamic dimensions {dims}, and the "
                             "recipe declares " + (f"{shapes[name]}" if name in shapes
                                                   else "no input of that name"),
                             f"{what} needs one shape per input: declare it under "
                             "`inputs:` with the model's rank")
        pinned[name] = shapes[name]
    return pinned


def pin_input_shapes(source: Path, destination: Path, pinned: dict[str, list[int]]) -> None:
    """A copy of the ONNX model with those inputs' shapes fixed, shapes re-inferred.

    (onnx2tf's own `overwrite_input_shape` is applied only on its onnxsim path, which
    edgebuild skips; fixing the graph's input shapes gives every converter a static
    model.)
    """
    import onnx

    model = onnx.load(str(source))
    for value in model.graph.input:
        if value.name in pinned:
            for dim, size in zip(value.type.tensor_type.shape.dim, pinned[value.name],
                                 strict=True):
                dim.Clear()
                dim.dim_value = size
    for value in model.graph.output:  # re-inferred from the now static inputs
        value.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    # Fold what the fixed sizes made constant (Shape -> Range grids, Reshape targets):
    # left as a subgraph, onnx2tf converts a dynamic Range on a channels-last tensor
    # into the wrong grid (MTCNN P-Net's anchors: mAP 0.1 vs FP32 before this fold).
    import onnxslim

    onnx.save(onnxslim.slim(model), str(destination))
