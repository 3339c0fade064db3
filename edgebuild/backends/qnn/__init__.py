"""Qualcomm QNN: declared (formats, extra) so its profile plans; not implemented yet."""

from edgebuild.backends.planned import PlannedBackend


class QnnBackend(PlannedBackend):
    name = "qnn"
    summary = "Qualcomm QNN context binary via onnxruntime-qnn"
    accepts = ("onnx",)
    produces = "qnn-context"
    extra = "qnn"
    tracking = "the QNN backend issue"


__all__ = ["QnnBackend"]
