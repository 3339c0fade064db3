"""Apple Core ML: declared (formats, extra) so its profile plans; not implemented yet."""

from edgebuild.backends.planned import PlannedBackend


class CoreMlBackend(PlannedBackend):
    name = "coreml"
    summary = "Apple Core ML .mlpackage via coremltools"
    accepts = ("pytorch", "onnx")
    produces = "mlpackage"
    extra = "coreml"
    tracking = "the Core ML backend issue"


__all__ = ["CoreMlBackend"]
