"""The LiteRT-Torch backend's options (a target profile's `options:`).

How the .tflite runs is the TFLite backend's (TfliteRuntimeOptions: the same
interpreter, delegates and phone), so those options are TFLite's own. Only the
conversion differs: `precision` is the ai-edge-quantizer builds, `keep_float` and
`bias_correction` its INT8 rules (ExecuTorch's names and meaning), and onnx2tf's options
(io_type, exclude_nodes …) do not exist.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from edgebuild.backends.tflite.options import TfliteRuntimeOptions
from edgebuild.core.datasets import DatasetRef


class Precision(StrEnum):
    FLOAT32 = "float32"
    INT8 = "int8"  # ai-edge-quantizer static_wi8_ai8: int8 weights and activations, calibrated
    INT16X8 = "int16x8"  # static_wi8_ai16: int8 weights, int16 activations, calibrated


class LitertTorchOptions(TfliteRuntimeOptions):
    """Options of the litert-torch backend (target profile `options:`)."""

    precision: Precision = Field(
        Precision.FLOAT32, description="float32, int8 (ai-edge-quantizer's static int8 "
        "weights and activations) or int16x8 (int8 weights, int16 activations), both "
        "calibrated on `calibration_dataset`.")
    calibration_dataset: DatasetRef | None = Field(
        None, description="Recipe dataset for int8 calibration (representative inputs).")
    calibration_samples: int = Field(64, ge=1, description="Calibration samples used, at most.")
    keep_float: list[str] = Field(
        [], description="With `precision: int8` or `int16x8`: modules left float (ai-edge-"
        "quantizer's `no_quantize` for every op LiteRT-Torch names after them), named as "
        "PyTorch names them (`_conv_stem`) or as the ONNX node or output torch.onnx exports "
        "them to (`/_conv_stem/Conv_output_0`), as ExecuTorch's `keep_float` and the "
        "quantize pass's `exclude_nodes` do; an unknown name is an error.")
    bias_correction: bool = Field(
        True, description="With `precision: int8`: measure each int8 conv/linear's mean "
        "output shift per channel on the calibration data (a PT2E twin in ai-edge-"
        "quantizer's scheme; needs ExecuTorch's quantizer, in the default install) and "
        "subtract it from the bias after it in the float model before conversion.")

    @model_validator(mode="after")
    def _consistent(self) -> LitertTorchOptions:
        if self.precision is not Precision.FLOAT32 and self.calibration_dataset is None:
            raise ValueError(f"precision {self.precision.value} needs `calibration_dataset` "
                             "(a recipe dataset of representative inputs)")
        if self.precision is Precision.FLOAT32 and self.keep_float:
            raise ValueError("keep_float names modules to leave unquantized: it needs "
                             "`precision: int8` or `int16x8`")
        return self
