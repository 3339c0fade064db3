"""OpenVINO backend: ONNX or NNCF-quantized IR -> OpenVINO IR, and an InferRequest runner."""

from edgebuild.backends.openvino.backend import OpenVinoBackend
from edgebuild.backends.openvino.options import OpenVinoOptions
from edgebuild.backends.openvino.runner import OpenVinoRunner

__all__ = ["OpenVinoBackend", "OpenVinoOptions", "OpenVinoRunner"]
