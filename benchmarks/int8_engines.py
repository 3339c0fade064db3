"""ONNX Runtime's static QDQ against AIMET's encodings on EfficientNet-Lite0, all 117 photos.

    PYTHONPATH=. python benchmarks/int8_engines.py ort                      # ORT: 3 methods
    PYTHONPATH=.:/path/to/aimet python benchmarks/int8_engines.py \\
        '{"label": "SeqMSE", "seq_mse": 10}' '{"label": "AdaRound", "adaround": 200}'

The quickstart model (tests/integration/passes/efficientnet.py builds it with the real
passes), calibrated on the recipe's `calibration` photos (91, Debian opencv-doc),
compared with FP32 ONNX Runtime on all 117 photos (those 91 and scikit-image's 26):
mean logit cosine, top-1 agreement, and decided agreement (margin 0.2: the photos
whose FP32 top-2 logits differ by at least 0.2; fidelity/metrics.py). Each model is run
twice: on ONNX Runtime's CPU kernels (integer kernels; they saturate on a CPU without
VNNI) and with graph optimizations off (each Q/DQ computed in float: what the
encodings themselves are worth, as a backend without that saturation would see them).
AIMET arguments: `seq_mse` (candidates), `adaround` (iterations), `scheme` (min_max or
tf_enhanced), `cle` (AIMET's cross-layer equalization), `samples` (optimisation
samples, default 8). One JSON line per configuration.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(args: list[str]) -> None:
    import onnx
    import onnxruntime as ort
    from pydantic import TypeAdapter

    from edgebuild.data.loaders import Samples, load_dataset
    from edgebuild.fidelity.metrics import decided_agreement, value_metrics
    from edgebuild.recipe.datasets import DatasetSpec
    from tests.integration.passes import efficientnet as en

    fp32 = en._exported()
    held = en.photos(1000)
    spec = TypeAdapter(DatasetSpec).validate_python(en.recipe_data()["datasets"]["calibration"])
    calib = load_dataset(spec, en.RECIPE.parent, ["image"], "calibration")
    photos = Samples({"image": np.concatenate([held.inputs["image"], calib.inputs["image"]])},
                     None, [*held.names, *calib.names], None)
    feeds = [{"image": calib.inputs["image"][i:i + 1]} for i in range(len(calib))]

    def run(path: Path, fused: bool) -> np.ndarray:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        if not fused:
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        return np.concatenate([session.run(None, {"image": photos.inputs["image"][i:i + 1]})[0]
                               for i in range(len(photos))])

    reference = run(fp32, True)

    def score(label: str, path: Path, seconds: float) -> None:
        row: dict[str, Any] = {"config": label, "seconds": round(seconds, 1)}
        for fused, key in ((True, "kernels"), (False, "qdq_float")):
            got = run(path, fused)
            decided = decided_agreement(got, reference, 0.2).metrics
            row[key] = {"cosine": round(value_metrics(got, reference)["cosine"], 5),
                        "agreement": round(100 * float(np.mean(
                            got.argmax(1) == reference.argmax(1))), 2),
                        "decided_agreement": round(decided["decided_agreement"], 2),
                        "decided": int(decided["decided_samples"])}
        print(json.dumps(row), flush=True)

    work = Path(tempfile_dir())
    for arg in args:
        started = time.monotonic()
        if arg == "ort":
            ort_rows(fp32, feeds, work, score)
            continue
        options = json.loads(arg)
        path = work / "aimet.onnx"
        onnx.save(aimet_qdq(fp32, feeds, options), str(path))
        score(f"AIMET {options.get('label', arg)}", path, time.monotonic() - started)


def tempfile_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="int8-engines-")


def ort_rows(fp32: Path, feeds: list[dict[str, np.ndarray]], work: Path, score: Any) -> None:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    class Reader:
        def __init__(self) -> None:
            self.it = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

        def __len__(self) -> int:
            return len(feeds)

        def set_range(self, start_index: int, end_index: int) -> None:
            self.it = iter(feeds[start_index:end_index])

    methods = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
               "entropy": CalibrationMethod.Entropy}
    for name, method in methods.items():
        started = time.monotonic()
        path = work / f"ort-{name}.onnx"
        quantize_static(str(fp32), str(path), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, calibrate_method=method,
                        extra_options={"CalibStridedMinMax": 1} if name != "minmax" else {})
        score(f"ONNX Runtime static QDQ per-channel {name}", path, time.monotonic() - started)


def aimet_qdq(fp32: Path, feeds: list[dict[str, np.ndarray]], options: dict[str, Any]) -> Any:
    import aimet_onnx
    import onnx
    from aimet_onnx import QuantizationSimModel

    configs = Path(aimet_onnx.__file__).parent / "common" / "quantsim_config"
    model = onnx.load(str(fp32))
    if options.get("cle"):
        from aimet_onnx.cross_layer_equalization import equalize_model

        equalize_model(model)
    sim = QuantizationSimModel(model, param_type="int8", activation_type="int8",
                               quant_scheme=options.get("scheme", "min_max"),
                               config_file=str(configs / "default_config_per_channel.json"))
    subset = feeds[:options.get("samples", 8)]
    if options.get("seq_mse"):
        aimet_onnx.apply_seq_mse(sim, subset, num_candidates=options["seq_mse"])
    if options.get("adaround"):
        aimet_onnx.apply_adaround(sim, subset, num_iterations=options["adaround"])
    sim.compute_encodings(feeds)
    return sim.to_onnx_qdq()


if __name__ == "__main__":
    main(sys.argv[1:])
