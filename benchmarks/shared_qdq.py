"""One set of Q/DQ encodings for every backend that consumes Q/DQ (issue 31).

    PYTHONPATH=. python benchmarks/shared_qdq.py             # docs/benchmarks.md rows but QNN
    PYTHONPATH=. python benchmarks/shared_qdq.py --qnn '{"label": "the shared set",
        "params": {"reduce_range": "auto"}, "exclude": 4}'       # one, also on the HTP emulator

The quickstart model (tests/integration/passes/efficientnet.py builds it with the real
passes) quantized by the `quantize` pass's own code (quant/prepare.py: explicit parameters,
no search): per-channel int8 weights, minmax calibration on the recipe's 91 `calibration`
photos, bias correction, the first `exclude` weight layers kept float. Each Q/DQ model is
then run as the consumers run it, and compared with FP32 ONNX Runtime on all 117 photos
(the 91 and scikit-image's 26; decided agreement at margin 0.2, fidelity/metrics.py):

- `qdq_float`: ONNX Runtime with graph optimizations off, each Q/DQ computed in float
  (CPU-independent; the jetson-orin-nano target's accuracy stand-in runs it this way);
- `openvino`: OpenVINO's CPU plugin reading the Q/DQ ONNX (INFERENCE_PRECISION_HINT f32:
  its low-precision transformations turn Q/DQ into its int8 kernels, as intel-cpu runs it);
- `qnn` (with --qnn): the same file on the QNN HTP emulator (onnxruntime-qnn), as is.

`params` are the quantize pass's (QuantizeParams); `exclude`: how many of the first
weight layers stay float. `activation_type: int8, activation_symmetric: true` or
`preset: tensorrt` give the Q/DQ TensorRT takes (zero point 0); the default is uint8
asymmetric activations. One JSON line per configuration; `photos`: the 26 alone.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The weight layers of EfficientNet-Lite0 in graph order, as the quickstart exports them:
# the fidelity budget (docs/benchmarks.md) kept the first four float.
FIRST_LAYERS = ["/_conv_stem/Conv_output_0", "/_blocks.0/_depthwise_conv/Conv_output_0",
                "/_blocks.0/_project_conv/Conv", "/_blocks.1/_expand_conv/Conv",
                "/_blocks.1/_depthwise_conv/Conv_output_0", "/_blocks.1/_project_conv/Conv"]
SKIMAGE = 26  # the photos come first, then the 91 calibration photos
SYMMETRIC = {"activation_type": "int8", "activation_symmetric": True}
ASYMMETRIC_AUTO = {"reduce_range": "auto"}
# The rows of docs/benchmarks.md, "One set of Q/DQ encodings": (label, params, float layers).
DEFAULT = [{"label": label, "params": params, "exclude": n} for label, params, n in (
    ("uint8 asymmetric", {}, 0), ("uint8 asymmetric", {}, 2), ("uint8 asymmetric", {}, 4),
    ("uint8 asymmetric, reduce_range auto", ASYMMETRIC_AUTO, 4),
    ("uint8 asymmetric, reduce_range auto", ASYMMETRIC_AUTO, 3),
    ("int8 symmetric", SYMMETRIC, 2), ("int8 symmetric", SYMMETRIC, 4),
    ("int8 symmetric, reduce_range true", {**SYMMETRIC, "reduce_range": True}, 4),
    ("preset tensorrt", {"preset": "tensorrt"}, 2), ("preset tensorrt", {"preset": "tensorrt"}, 4))]


def main(args: list[str]) -> None:
    from pydantic import TypeAdapter

    from edgebuild.data.loaders import load_dataset
    from edgebuild.recipe.datasets import DatasetSpec
    from tests.integration.passes import efficientnet as en

    qnn = "--qnn" in args
    configs = [json.loads(a) for a in args if a != "--qnn"] or DEFAULT
    fp32 = en._exported()
    held = en.photos(1000)
    spec = TypeAdapter(DatasetSpec).validate_python(en.recipe_data()["datasets"]["calibration"])
    calib = load_dataset(spec, en.RECIPE.parent, ["image"], "calibration")
    images = np.concatenate([held.inputs["image"], calib.inputs["image"]])
    reference = run_ort(fp32, images, optimized=True)
    work = Path(tempfile.mkdtemp(prefix="shared-qdq-"))
    prepared: dict[Any, Any] = {}
    for index, config in enumerate(configs):
        started = time.monotonic()
        params = {**config.get("params", {}),
                  "exclude_nodes": FIRST_LAYERS[:int(config.get("exclude", 0))]}
        path = work / f"{index}.onnx"
        quantize(fp32, path, params, calib, work, prepared)
        row: dict[str, Any] = {"config": config.get("label", str(config)),
                               "quantize_seconds": round(time.monotonic() - started)}
        row["qdq_float"] = score(run_ort(path, images, optimized=False), reference)
        row["openvino"] = score(run_openvino(path, images), reference)
        if qnn:
            row["qnn"] = score(run_qnn(path, images), reference)
        print(json.dumps(row), flush=True)


def quantize(fp32: Path, destination: Path, params: dict[str, Any], calib: Any, work: Path,
             prepared: dict[str, Any]) -> None:
    """The quantize pass's code path; bias shifts measured once per configuration (the
    exclusions aside), as the fidelity budget does."""
    from edgebuild.quant import prepare as prep
    from edgebuild.quant.params import QuantizeParams

    p = QuantizeParams.model_validate({
        "mode": "static", "calibration": "calibration", "per_channel": True,
        "bias_correction": True, "compare_samples": 0, **params})
    key = json.dumps({k: v for k, v in params.items() if k != "exclude_nodes"}, sort_keys=True)
    if key not in prepared:
        scratch = work / f"scratch-{len(prepared)}"
        prepared[key] = (prep.prepare(fp32, p, calib, scratch), scratch)
    base, scratch = prepared[key]
    chosen = prep._with_float_nodes(type(base)(base.source, base.path, dict(base.metadata),
                                               base.shifts, base.reduced), p, calib)
    prep.quantize_prepared(chosen, destination, p, calib, chosen.exclude, scratch)
    base.shifts, base.reduced = chosen.shifts, chosen.reduced


def run_ort(path: Path, images: np.ndarray, optimized: bool) -> np.ndarray:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"image": images[i:i + 1]})[0]
                           for i in range(len(images))])


def run_openvino(path: Path, images: np.ndarray) -> np.ndarray:
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(ov.convert_model(str(path)), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    return np.concatenate([np.array(request.infer({0: images[i:i + 1]})[0])
                           for i in range(len(images))])


def run_qnn(path: Path, images: np.ndarray) -> np.ndarray:
    from edgebuild.backends.qnn.options import QnnOptions
    from edgebuild.backends.qnn.session import session

    options = QnnOptions.model_validate({"calibration_dataset": "calibration"})
    run = session(path, options.provider_options(), cpu_fallback=True)
    return np.concatenate([run.run(None, {"image": images[i:i + 1]})[0]
                           for i in range(len(images))])


def score(got: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """All 117 photos, and (`photos`) scikit-image's 26 alone: the quickstart's gate set."""
    return {**_score(got, reference), "photos": _score(got[:SKIMAGE], reference[:SKIMAGE])}


def _score(got: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    from edgebuild.fidelity.metrics import decided_agreement, value_metrics

    decided = decided_agreement(got, reference, 0.2).metrics
    return {"cosine": round(value_metrics(got, reference)["cosine"], 5),
            "agreement": round(100 * float(np.mean(got.argmax(1) == reference.argmax(1))), 2),
            "decided_agreement": round(decided["decided_agreement"], 2),
            "decided": int(decided["decided_samples"])}


if __name__ == "__main__":
    main(sys.argv[1:])
