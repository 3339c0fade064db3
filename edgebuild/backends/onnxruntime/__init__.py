"""ONNX Runtime backend: compiler (offline graph optimization) and runner."""

from edgebuild.backends.onnxruntime.backend import OnnxRuntimeBackend, OrtOptions

__all__ = ["OnnxRuntimeBackend", "OrtOptions"]
