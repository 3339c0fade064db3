"""ONNX Runtime backend: compiler (offline graph optimization) and runner."""

from edgebuild.backends.onnxruntime.backend import OnnxRuntimeBackend
from edgebuild.backends.onnxruntime.options import OrtOptions

__all__ = ["OnnxRuntimeBackend", "OrtOptions"]
