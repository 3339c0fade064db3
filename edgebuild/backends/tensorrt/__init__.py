"""NVIDIA TensorRT: TensorRT-ready ONNX, parser coverage and the trtexec line built here;
the engine built and timed on the device (docs/backends-tensorrt.md)."""

from edgebuild.backends.tensorrt.backend import TensorRtBackend
from edgebuild.backends.tensorrt.options import TensorRtOptions

__all__ = ["TensorRtBackend", "TensorRtOptions"]
