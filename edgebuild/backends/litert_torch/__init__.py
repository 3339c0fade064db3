"""LiteRT-Torch backend (backend.py); the entry point names LitertTorchBackend here."""

from edgebuild.backends.litert_torch.backend import LitertTorchBackend

__all__ = ["LitertTorchBackend"]
