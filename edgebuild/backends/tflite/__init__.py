"""TFLite (LiteRT) backend: Android phones, NNAPI / GPU / XNNPACK delegates."""

from edgebuild.backends.tflite.backend import TfliteBackend

__all__ = ["TfliteBackend"]
