"""PyTorch -> .tflite with Google's LiteRT-Torch, and int8 with ai-edge-quantizer.

    nn.Module ─ litert_torch.convert(model, example inputs)   (torch.export, then
              StableHLO lowered by litert-converter: no ONNX, no TensorFlow)
              ─ .export ─▶ model.tflite (float32; the input stays NCHW)
              ─ [int8: ai_edge_quantizer.Quantizer(model, static w8a8 + `keep_float`'s
                 ops no_quantize: layers.py), min/max ranges of the recipe's samples,
                 .quantize]
              ─▶ model.tflite (int8 in/out)
    [int8 with bias_correction: the model's biases corrected first, bias.py]

Both libraries are imported only here, when a stage runs (`import litert_torch` pulls
JAX, ~3 s). A refused capture is torch.export's, explained as the ExecuTorch backend
explains it (the model's line, what to try); a failure after it names the step.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.errors import BackendUnavailable, StageError
from edgebuild.passes.torch_capture import export_failure, first_line

if TYPE_CHECKING:
    import numpy as np

INSTALL = ("`bash scripts/setup.sh` installs it with the tflite and executorch extras, "
           "EDGEBUILD_LITERT_TORCH=1 bash scripts/setup.sh with any (a --no-deps install: its "
           "declared pins would downgrade pydantic; docs/backends-tflite.md, \"LiteRT-Torch\")")


@contextmanager
def needs_litert_torch() -> Iterator[None]:
    """An ImportError of LiteRT-Torch or its quantizer as BackendUnavailable with the
    install line (its declared pins would downgrade pydantic: see INSTALL)."""
    try:
        yield
    except ImportError as exc:
        raise BackendUnavailable("litert-torch", f"{exc.name or exc} is not importable: "
                                 f"{INSTALL}") from None


def to_tflite(model: Any, inputs: tuple[Any, ...], destination: Path) -> float:
    """Convert `model` at the example `inputs` into `destination`; the seconds it took."""
    import torch

    with needs_litert_torch():
        import litert_torch
    started = time.perf_counter()
    try:
        with torch.no_grad():
            edge = litert_torch.convert(model.eval(), inputs)
    except Exception as exc:  # torch.export's many types, then the converter's
        text = str(exc)
        if "torch.export" in text or type(exc).__module__.startswith("torch"):
            raise export_failure("LiteRT-Torch", exc, "torch.export") from None
        raise StageError(f"LiteRT-Torch: lowering to TFLite failed ({type(exc).__name__}: "
                         f"{first_line(text)})",
                         "an op litert-converter cannot lower is named above; try the "
                         "`tflite` backend (ONNX -> onnx2tf) or the `executorch` one") from None
    try:
        edge.export(str(destination))
    except Exception as exc:
        raise StageError(f"LiteRT-Torch: writing the .tflite failed ({type(exc).__name__}: "
                         f"{first_line(str(exc))})") from None
    return time.perf_counter() - started


def quantize(model: Path, signature: str, feeds: list[dict[str, np.ndarray]],
             destination: Path, activation_bits: int, keep: list[str]) -> float:
    """ai-edge-quantizer's static quantization of `model` (int8 weights, `activation_bits`
    8 or 16 activations), calibrated on `feeds` (each the model's signature inputs by
    name, of `signature`), the ops the `keep` regexes find left float (layers.py); the
    seconds it took."""
    with needs_litert_torch():
        from ai_edge_quantizer import (
            algorithm_manager,
            calibrator,
            qtyping,
            quantizer,
            recipe_manager,
        )
        from ai_edge_quantizer.utils import qsv_utils
    started = time.perf_counter()
    try:
        chosen = recipe_manager.RecipeManager()
        everything = qtyping.TFLOperationName.ALL_SUPPORTED
        # recipe.static_wi8_ai8 / static_wi8_ai16, then the float layers: a later config
        # of a scope wins (RecipeManager.get_quantization_configs).
        chosen.add_static_config(regex=".*", operation_name=everything,
                                 activation_num_bits=activation_bits, weight_num_bits=8)
        for regex in keep:
            chosen.add_quantization_config(
                regex=regex, operation_name=everything,
                algorithm_key=algorithm_manager.AlgorithmName.NO_QUANTIZE)
        engine = quantizer.Quantizer(str(model), chosen.get_quantization_recipe())
        # The range seen (min/max over the samples), not Quantizer.calibrate's default
        # moving average (0.95 smoothing, a narrower range that clips): bias correction's
        # twin measures with min/max ranges (bias.py), and the two must agree.
        # EfficientNet-Lite0, 4 float layers + bias correction: cosine 0.9973 with min/max,
        # 0.9926 with the moving average (docs/backends-tflite.md, "LiteRT-Torch").
        ranges = calibrator.Calibrator(str(model), qsv_update_func=qsv_utils.min_max_update)
        ranges.calibrate({signature: feeds}, chosen)
        result = engine.quantize(ranges.get_model_qsvs())
        part = destination.with_name(f".{destination.name}.{os.getpid()}")
        result.export_model(str(part), overwrite=True)
        part.replace(destination)
    except Exception as exc:
        raise StageError(f"ai-edge-quantizer: static w8a{activation_bits} failed "
                         f"({type(exc).__name__}: {first_line(str(exc))})",
                         "try `precision: float32`, or the `tflite` backend's int8 (its "
                         "INT8 rules keep float what int8 cannot hold)") from None
    return time.perf_counter() - started


def signature_key(model: Path) -> str:
    """The converted model's (one) signature, which calibration feeds by name."""
    from ai_edge_litert.interpreter import Interpreter

    return str(next(iter(Interpreter(model_path=str(model)).get_signature_list())))
