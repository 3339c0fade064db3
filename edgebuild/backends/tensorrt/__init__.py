"""NVIDIA TensorRT: declared (formats, extra) so its profile plans; not implemented yet."""

from edgebuild.backends.planned import PlannedBackend


class TensorRtBackend(PlannedBackend):
    name = "tensorrt"
    summary = "NVIDIA TensorRT engine (explicit QDQ INT8)"
    accepts = ("onnx",)
    produces = "tensorrt-engine"
    extra = "tensorrt"
    tracking = "the TensorRT backend issue"


__all__ = ["TensorRtBackend"]
