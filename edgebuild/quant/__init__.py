"""INT8 (and FP16) quantization of ONNX models: the wing behind the `quantize` pass.

The shared INT8 rules (`safety`) are read by four backends as well; the rest is the
quantize pass's own work, imported only inside its worker.
"""
