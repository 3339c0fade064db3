"""INT8 (and FP16) quantization of ONNX models: the wing behind the `quantize` pass.

Each layer imports only the ones below it:

    strategy           which of the below a stage runs (passes/quantize.py calls it)
    search/            sensitivity, accuracy_aware, budget: many quantizations, judged
    prepare            the float model made ready once; quantize_prepared
    levers/            equalize, bias_correction, reduce_range
    engine             the one quantize call: fp16, AIMET or ONNX Runtime (engines/)
    params             QuantizeParams: what a recipe writes
    safety, samples, prepared, qdq_graph, score_range, layer_compare

`safety` (the nodes INT8 leaves float) is read by the TFLite, QNN and OpenVINO
backends too; the rest is imported only inside the quantize pass's worker.
"""
