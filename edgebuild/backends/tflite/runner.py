"""Run a .tflite model on this machine with ai-edge-litert's interpreter.

The runner speaks the recipe's contract (ONNX input names, NCHW, float32 — or the
recipe's own integer dtype, e.g. a uint8 image input, which is fed as it is) and
adapts to the model: it transposes each tensor with the permutation the compile
stage recorded (NCHW -> NHWC for onnx2tf's layout) and quantizes / dequantizes
integer inputs and outputs with their scale and zero point — what an app does
around a full-integer model. For a 1x3x224x224 input that costs 0.1-0.25 ms on
this 2-core machine (2-4 % of EfficientNet-Lite0's host latency); it is part of
the timed call, as it would be in an app that receives NCHW float data.

XNNPACK is TFLite's default CPU delegate and is applied here with the
profile's thread count (`delegate: cpu` turns it off to time the builtin
kernels). NNAPI and GPU delegates exist only on a phone: on the host the
model runs on XNNPACK and every figure is labelled a host figure. When XNNPACK
refuses the model (xnnpack.py says which layer and why), the runner either runs
the builtin kernels and records that in `fallback` (`delegate_fallback: builtin`)
or fails naming the layer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta
from edgebuild.errors import DataError, ShapeError, StageError

if TYPE_CHECKING:
    import numpy as np


class TfliteRunner(Runner):
    def __init__(self, model: Path, io: dict[str, Any], threads: int | None,
                 use_xnnpack: bool, fallback: bool = True) -> None:
        super().__init__()
        self.model = model
        self.io = io  # from the compile stage's metadata: see tensors.io_spec
        self.threads = threads
        self.use_xnnpack = use_xnnpack
        self.allow_fallback = fallback
        self._interpreter: Any = None
        self._inputs: list[dict[str, Any]] = []
        self._outputs: list[dict[str, Any]] = []

    def _activate(self) -> None:
        from edgebuild.backends.tflite import xnnpack

        try:
            self._interpreter = self._load(self.use_xnnpack)
        except (RuntimeError, ValueError) as exc:
            if not (self.use_xnnpack and xnnpack.is_refusal(exc)):
                raise
            why = xnnpack.explain(exc, self.model)
            if not self.allow_fallback:
                raise StageError(why, "set the target's `delegate_fallback: builtin` to run "
                                 "TFLite's builtin kernels instead, or `delegate: cpu`; or "
                                 "keep that layer float (its calibration range is far "
                                 "narrower than its weights)") from None
            self._interpreter = self._load(use_xnnpack=False)
            self.fallback = f"ran on builtin kernels instead: {why}"
        self._inputs = list(self.io["inputs"])
        self._outputs = list(self.io["outputs"])

    def _load(self, use_xnnpack: bool) -> Any:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        resolver = (OpResolverType.AUTO if use_xnnpack
                    else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        interpreter = Interpreter(model_path=str(self.model), num_threads=self.threads,
                                  experimental_op_resolver_type=resolver)
        interpreter.allocate_tensors()  # where XNNPACK creates its runtime, or refuses
        return interpreter

    def _input_metadata(self) -> TensorMeta:
        return {t["name"]: (tuple(recipe_shape(t)), recipe_dtype(t)) for t in self._inputs}

    def _reshape(self, shapes: dict[str, list[int]]) -> None:
        """The model is pinned at the example shape (onnx-to-tf): resize its inputs with
        `resize_tensor_input` + `allocate_tensors` and run once. onnx2tf often bakes the
        example size into Reshape constants, so the run can refuse; that is a
        ShapeError naming the input, not the interpreter's traceback."""
        import numpy as np

        interpreter = self._interpreter
        resized = []
        for tensor in self._inputs:
            if tensor["name"] not in shapes:
                continue
            shape = list(shapes[tensor["name"]])
            model_shape = [shape[p] for p in tensor["perm"]] if tensor["perm"] else shape
            resized.append({**tensor, "shape": shape, "model_shape": model_shape})
            try:
                interpreter.resize_tensor_input(tensor["index"], model_shape, strict=False)
            except Exception as exc:
                self._activate()
                raise self._refused(tensor["name"], shape, exc) from exc
        names = sorted(shapes)
        try:
            interpreter.allocate_tensors()
            for tensor in resized:
                zeros = np.zeros(tensor["shape"], dtype=recipe_dtype(tensor))
                interpreter.set_tensor(tensor["index"], to_model(zeros, tensor))
            interpreter.invoke()
        except Exception as exc:
            # A refused resize leaves the interpreter at the refused size: load it
            # again, so the next profile (or the built shape) still runs.
            self._activate()
            raise self._refused(", ".join(names), shapes, exc) from exc
        by_name = {t["name"]: t for t in resized}
        self._inputs = [by_name.get(t["name"], t) for t in self._inputs]

    @staticmethod
    def _refused(name: str, shape: Any, exc: Exception) -> ShapeError:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        return ShapeError(
            f"the TFLite model is pinned at the example shape and cannot be resized for "
            f"input '{name}' to {shape}: {first}",
            "onnx2tf baked the example size into the graph (a Reshape constant); time this "
            "target at the example shape only (remove the size from `shapes:`), or build "
            "one target per size")

    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        interpreter = self._interpreter
        for tensor in self._inputs:
            interpreter.set_tensor(tensor["index"], to_model(feeds[tensor["name"]], tensor))
        interpreter.invoke()
        return {t["name"]: from_model(interpreter.get_tensor(t["index"]), t)
                for t in self._outputs}

    def _deactivate(self) -> None:
        self._interpreter = None


def recipe_shape(tensor: dict[str, Any]) -> list[int]:
    """The input's shape in the recipe's layout, from the model's own (fixed) shape: the
    ONNX-side shape may still name a dynamic axis that the conversion pinned."""
    perm, model_shape = tensor["perm"], tensor.get("model_shape")
    if model_shape is None:
        return list(tensor["shape"])
    return [model_shape[perm.index(i)] for i in range(len(perm))] if perm else list(model_shape)


def _quantized(tensor: dict[str, Any]) -> bool:
    quantization = tensor["quantization"]
    return tensor["dtype"] != "float32" and quantization is not None and quantization[0] != 0


def recipe_dtype(tensor: dict[str, Any]) -> str:
    """The dtype the recipe feeds: float32 for a quantized tensor (the runner quantizes
    it), else the model's own — a uint8 image input is uint8 in the recipe too."""
    return "float32" if _quantized(tensor) else str(tensor.get("recipe_dtype") or
                                                     tensor["dtype"])


def to_model(array: np.ndarray, tensor: dict[str, Any]) -> np.ndarray:
    """Recipe layout and dtype -> the model's (transpose, then quantize)."""
    import numpy as np

    if tensor["perm"] is not None:
        array = np.transpose(array, tensor["perm"])
    if not _quantized(tensor):  # float32, or an integer input such as raw uint8 pixels
        if tensor.get("recipe_dtype") and array.size:  # narrowed by the converter
            info = np.iinfo(tensor["dtype"])
            if array.min() < info.min or array.max() > info.max:
                raise DataError(f"input '{tensor['name']}' has values outside "
                                f"{tensor['dtype']}, the type the converter gave the model's "
                                f"input ({array.min()}..{array.max()})")
        return np.ascontiguousarray(array, dtype=tensor["dtype"])
    scale, zero_point = tensor["quantization"]
    info = np.iinfo(tensor["dtype"])
    quantized = np.round(array / scale) + zero_point
    integers: np.ndarray = np.clip(quantized, info.min, info.max).astype(tensor["dtype"])
    return integers


def from_model(array: np.ndarray, tensor: dict[str, Any]) -> np.ndarray:
    """The model's output -> float32 in the recipe's layout (dequantize, transpose)."""
    import numpy as np

    if _quantized(tensor):
        scale, zero_point = tensor["quantization"]
        array = (array.astype(np.float32) - zero_point) * scale
    if tensor["perm"] is not None:
        array = np.transpose(array, tensor["perm"])
    copied: np.ndarray = np.array(array, dtype=np.float32)  # the interpreter reuses its buffer
    return copied
