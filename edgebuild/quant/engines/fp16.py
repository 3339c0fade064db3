"""`mode: fp16`: the float model in half precision (ONNX Runtime's float16 converter)."""

from __future__ import annotations

from pathlib import Path


def convert(source: Path, destination: Path, keep_io_fp32: bool) -> None:
    """Write `source` with float16 weights and activations; `keep_io_fp32` keeps float32
    inputs and outputs (a Cast at each end)."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = convert_float_to_float16(onnx.load(str(source)), keep_io_types=keep_io_fp32)
    onnx.save(model, str(destination))
