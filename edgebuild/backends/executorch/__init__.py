"""PyTorch ExecuTorch backend (backend.py); the entry point names ExecutorchBackend here."""

from edgebuild.backends.executorch.backend import ExecutorchBackend

__all__ = ["ExecutorchBackend"]
