"""Who computes the encodings: ONNX Runtime's quantizer, AIMET, or an FP16 conversion."""
