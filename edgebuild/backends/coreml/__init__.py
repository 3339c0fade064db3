"""Apple Core ML backend (backend.py); the entry point names CoreMlBackend here."""

from edgebuild.backends.coreml.backend import CoreMlBackend

__all__ = ["CoreMlBackend"]
