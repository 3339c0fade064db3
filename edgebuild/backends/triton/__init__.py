"""NVIDIA Triton Inference Server backend (backend.py); the entry point names TritonBackend."""

from edgebuild.backends.triton.backend import TritonBackend

__all__ = ["TritonBackend"]
