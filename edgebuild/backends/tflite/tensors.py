"""How the recipe's (ONNX) tensors map onto a TFLite model's: names, layout, quantization.

onnx2tf renames tensors and turns NCHW into NHWC; the compile stage records, for each
recipe input and output, the .tflite tensor it became, the axis permutation between
them and the integer scale/zero point (`io_spec`: the compile metadata `io`, which
runner.py and profile.py read). Calibration feeds are permuted the same way
(`savedmodel_spec`, `signature_feeds`).

    recipe input [1, 3, 224, 224] ── layout_perm ──▶ model input [1, 224, 224, 3]
    model output ── inverse(perm) ──▶ recipe output
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.errors import StageError

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.core.artifact import Artifact


def _same_shape(a: list[Any], b: list[Any]) -> bool:
    """Equal, treating a symbolic or unknown (<= 0) dimension as matching anything."""
    return len(a) == len(b) and all(
        not isinstance(x, int) or not isinstance(y, int) or x <= 0 or y <= 0 or x == y
        for x, y in zip(a, b, strict=True))


def layout_perm(recipe_shape: list[Any], model_shape: list[Any],
                 channels_last: bool) -> list[int] | None:
    """Permutation from the recipe's (ONNX) layout to the model's; None for identity."""
    rank = len(recipe_shape)
    to_nhwc = [0, *range(2, rank), 1]
    if rank >= 3 and _same_shape([recipe_shape[i] for i in to_nhwc], model_shape) and (
            channels_last or not _same_shape(recipe_shape, model_shape)):
        return to_nhwc
    if _same_shape(recipe_shape, model_shape):
        return None
    moved = _unit_axes_moved(recipe_shape, model_shape)
    if moved is not None:
        return moved
    raise StageError(f"the TFLite model's tensor shape {model_shape} is neither the ONNX "
                     f"shape {recipe_shape} nor its channels-last form",
                     "onnx2tf changed this tensor's layout in a way edgebuild cannot map")


def _unit_axes_moved(recipe_shape: list[Any], model_shape: list[Any]) -> list[int] | None:
    """The permutation that only moves size-1 axes from one shape to the other, if any.

    Moving an axis of size 1 leaves the data's order as it is, so the tensor is the
    same whatever onnx2tf did to get there: Silero VAD's next state, ONNX `[2, 1, 128]`,
    comes out of onnx2tf's Concat as `(1, 2, 128)`.
    """
    if len(recipe_shape) != len(model_shape) or not all(
            isinstance(d, int) and d > 0 for d in [*recipe_shape, *model_shape]):
        return None
    if sorted(recipe_shape) != sorted(model_shape) or (
            [d for d in recipe_shape if d != 1] != [d for d in model_shape if d != 1]):
        return None
    big = iter(i for i, d in enumerate(recipe_shape) if d != 1)
    units = iter(i for i, d in enumerate(recipe_shape) if d == 1)
    return [next(big) if d != 1 else next(units) for d in model_shape]


def inverse(perm: list[int] | None) -> list[int] | None:
    if perm is None:
        return None
    inverse = [0] * len(perm)
    for position, axis in enumerate(perm):
        inverse[axis] = position
    return inverse


def in_order(names: Iterable[str]) -> list[str]:
    """A signature's tensor names in their numbered order: `args_2` before `args_10`
    (LiteRT-Torch numbers its inputs args_0, args_1 …, its outputs output_0 …; a
    converter's signature map is keyed by name, so its order is lost)."""
    return sorted(names, key=lambda name: [(0, int(part), "") if part.isdigit() else
                                           (1, 0, part) for part in re.split(r"(\d+)", name)])


def match_names(onnx_names: list[str], model_names: list[str]) -> dict[str, str]:
    """ONNX name -> model name: by name when onnx2tf kept it, else by position
    (`model_names` in_order)."""
    if set(onnx_names) == set(model_names):
        return {n: n for n in onnx_names}
    if len(onnx_names) != len(model_names):
        raise StageError(f"the TFLite model has tensors {model_names}, the ONNX model "
                         f"{onnx_names}", "onnx2tf changed the model's inputs or outputs")
    return dict(zip(onnx_names, model_names, strict=True))


def savedmodel_spec(model: Artifact) -> dict[str, Any]:
    """Signature input names and shapes of the SavedModel, for calibration feeds."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(model.main.parent))
    signature = loaded.signatures["serving_default"]
    specs = signature.structured_input_signature[1]
    onnx_inputs: dict[str, list[Any]] = model.metadata["onnx_inputs"]
    names = match_names(list(onnx_inputs), in_order(specs))
    channels_last = model.metadata.get("layout") == "NHWC"
    return {onnx_name: {"name": names[onnx_name],
                        "dtype": specs[names[onnx_name]].dtype.as_numpy_dtype,
                        "perm": layout_perm(shape, [d if d is not None else -1
                                                     for d in specs[names[onnx_name]].shape],
                                             channels_last)}
            for onnx_name, shape in onnx_inputs.items()}


def signature_feeds(feeds: dict[str, np.ndarray],
                     spec: dict[str, Any]) -> dict[str, np.ndarray]:
    import numpy as np

    return {s["name"]: np.ascontiguousarray(
        np.transpose(feeds[name], s["perm"]) if s["perm"] else feeds[name], dtype=s["dtype"])
        for name, s in spec.items()}


def io_spec(tflite: Path, upstream: dict[str, Any]) -> dict[str, Any]:
    """How each ONNX input/output maps onto the .tflite tensors (stored in metadata)."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(tflite))
    runner = interpreter.get_signature_runner()
    channels_last = upstream.get("layout") == "NHWC"
    # Integer inputs the converter narrowed (LiteRT-Torch: int64 token ids as int32): the
    # recipe still feeds its own dtype, and the runner narrows them, checking the range.
    narrowed: dict[str, str] = upstream.get("recipe_dtypes") or {}

    def describe(onnx: dict[str, list[Any]], details: dict[str, Any],
                 is_input: bool) -> list[dict[str, Any]]:
        names = match_names(list(onnx), in_order(details))
        rows = []
        for onnx_name, recipe_shape in onnx.items():
            detail = details[names[onnx_name]]
            model_shape = [int(d) for d in detail["shape"]]
            perm = layout_perm(recipe_shape, model_shape, channels_last)
            scales = detail["quantization_parameters"]["scales"]
            zero_points = detail["quantization_parameters"]["zero_points"]
            rows.append({
                "name": onnx_name, "model_name": names[onnx_name],
                "index": int(detail["index"]), "shape": recipe_shape,
                "model_shape": model_shape, "perm": perm if is_input else inverse(perm),
                "dtype": str(detail["dtype"].__name__),
                **({"recipe_dtype": narrowed[onnx_name]} if is_input and narrowed.get(
                    onnx_name, detail["dtype"].__name__) != detail["dtype"].__name__ else {}),
                "quantization": ([float(scales[0]), int(zero_points[0])]
                                 if len(scales) else None)})
        return rows

    return {"inputs": describe(upstream["onnx_inputs"], runner.get_input_details(), True),
            "outputs": describe(upstream["onnx_outputs"], runner.get_output_details(), False)}
