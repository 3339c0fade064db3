"""Qualcomm QNN (Snapdragon HTP) through onnxruntime-qnn: context binaries built here and
checked on the x86 HTP emulator; latency on a phone."""

from edgebuild.backends.qnn.backend import QnnBackend
from edgebuild.backends.qnn.options import QnnOptions

__all__ = ["QnnBackend", "QnnOptions"]
