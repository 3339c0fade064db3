"""OpenVINO backend: ONNX or NNCF-quantized IR -> OpenVINO IR, and an InferRequest runner."""

from edgebuild.backends.openvino.backend import OpenVinoBackend, OpenVinoOptions
from edgebuild.backends.openvino.runner import OpenVinoRunner

__all__ = ["OpenVinoBackend", "OpenVinoOptions", "OpenVinoRunner"]
