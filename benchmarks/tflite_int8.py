"""Full-integer TFLite of EfficientNet-Lite0 against FP32, all 117 photos (issue 31).

    PYTHONPATH=. nice -n 15 python benchmarks/tflite_int8.py            # the docs' rows
    PYTHONPATH=. nice -n 15 python benchmarks/tflite_int8.py '{"label": "bias-corrected",
        "exclude": 4, "quantize": {"activation_type": "int8"}}'          # one configuration

The quickstart model (tests/integration/passes/efficientnet.py builds it with the real
passes); with `quantize` set, the `quantize` pass's `emit: corrected-float` first writes
the float model with the biases corrected for that quantization (static, per-channel
int8 weights, bias correction, minmax on the recipe's 91 `calibration` photos; the
`quantize` keys add to those). Then the real `onnx-to-tf` stage and the TFLite
backend's compile (`precision: int8, io_type: int8`, calibrated on the same 91 photos;
`tflite` keys add to those options), the first `exclude` weight layers kept float in
both (`exclude_nodes`, the quickstart's &shared-int8 names). The .tflite runs on the
host interpreter (XNNPACK, 2 threads), compared with FP32 ONNX Runtime on all 117
photos (scikit-image's 26, then the 91): cosine, plain agreement, and decided agreement
at margin 0.2 (fidelity/metrics.py); `photos`: the 26 alone, the quickstart's gate set.
One TFLite conversion and calibration takes minutes: run one process at a time.
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.shared_qdq import FIRST_LAYERS, run_ort, score  # noqa: E402

TFLITE_SCHEME = {"activation_type": "int8"}  # int8 asymmetric activations, as TFLite's
DEFAULT = [{"label": "converter, 4 float layers", "exclude": 4},
           {"label": "bias-corrected (emit: corrected-float), 4 float layers", "exclude": 4,
            "quantize": TFLITE_SCHEME}]


def cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main(args: list[str]) -> None:
    from pydantic import TypeAdapter

    from edgebuild.data.loaders import load_dataset
    from edgebuild.recipe.datasets import DatasetSpec
    from tests.integration.passes import efficientnet as en

    configs = [json.loads(a) for a in args] or DEFAULT
    fp32 = en._exported()
    held = en.photos(1000)
    spec = TypeAdapter(DatasetSpec).validate_python(en.recipe_data()["datasets"]["calibration"])
    calib = load_dataset(spec, en.RECIPE.parent, ["image"], "calibration")
    images = np.concatenate([held.inputs["image"], calib.inputs["image"]])
    reference = run_ort(fp32, images, optimized=True)
    work = Path(tempfile.mkdtemp(prefix="tflite-int8-"))
    for index, config in enumerate(configs):
        started = time.monotonic()
        exclude = FIRST_LAYERS[:int(config.get("exclude", 0))]
        source = fp32
        row: dict[str, Any] = {"config": config.get("label", str(config)), "cpu": cpu()}
        if "quantize" in config:
            source, row["bias_correction"] = corrected(
                fp32, work / f"{index}-float", {**config["quantize"], "exclude_nodes": exclude})
        built = build(source, work / f"{index}", {"exclude_nodes": exclude,
                                                  **config.get("tflite", {})})
        row["kept_float"] = built[1].metadata["kept_float"].get("honoured")
        row["build_seconds"] = round(time.monotonic() - started)
        row["tflite"] = score(run_tflite(*built, images), reference)
        print(json.dumps(row), flush=True)


def context(out: Path, inputs: dict[str, Any] | None = None) -> Any:
    from edgebuild.execute.worker import context_from_recipe
    from tests.integration.passes import efficientnet as en

    out.mkdir(parents=True, exist_ok=True)
    return context_from_recipe("bench", inputs or {}, out, en.recipe_data(), en.RECIPE.parent)


def artifact(folder: Path, fmt: str, result: Any) -> Any:
    from edgebuild.core.artifact import Artifact

    return Artifact("0" * 64, fmt, folder, {}, {}, {**result.metadata, "main": result.main})


def corrected(fp32: Path, out: Path, params: dict[str, Any]) -> tuple[Path, Any]:
    """The quantize pass with `emit: corrected-float` (the float model, biases corrected)."""
    from edgebuild.core.artifact import Artifact
    from edgebuild.passes.quantize import Quantize
    from edgebuild.quant.params import QuantizeParams

    p = QuantizeParams.model_validate({
        "mode": "static", "calibration": "calibration", "per_channel": True,
        "bias_correction": True, "emit": "corrected-float", **params})
    model = Artifact("0" * 64, "onnx", fp32.parent, {}, {}, {"main": fp32.name})
    result = Quantize().run(context(out, {"model": model}), p)
    return out / result.main, result.metadata.get("bias_correction")


def build(source: Path, out: Path, options: dict[str, Any]) -> tuple[Any, Any]:
    """onnx-to-tf, then the TFLite backend's int8 compile: (target, compiled artifact)."""
    from edgebuild.backends.tflite.backend import TfliteBackend
    from edgebuild.backends.tflite.onnx_to_tf import OnnxToTf, OnnxToTfParams
    from edgebuild.core.artifact import Artifact
    from edgebuild.core.profile import Device, TargetProfile
    from edgebuild.core.target import Target

    model = Artifact("0" * 64, "onnx", source.parent, {}, {}, {"main": source.name})
    converted = OnnxToTf().run(context(out / "tf", {"model": model}), OnnxToTfParams())
    saved = artifact(out / "tf", "tf-savedmodel", converted)
    profile = TargetProfile(
        name="android", description="", backend="tflite",
        device=Device(kind="cpu", arch="aarch64", os="android", name="phone"),
        options={"precision": "int8", "io_type": "int8", "calibration_dataset": "calibration",
                 "latency_on": "host", **options})
    target = Target(name="android-int8", profile=profile)
    compiled = TfliteBackend().compile(context(out / "tflite", {"model": saved}), target)
    return target, artifact(out / "tflite", "tflite", compiled)


def run_tflite(target: Any, compiled: Any, images: np.ndarray) -> np.ndarray:
    from edgebuild.backends.tflite.backend import TfliteBackend

    rows = []
    with TfliteBackend().runner(compiled, target, threads=2) as runner:
        for i in range(len(images)):
            rows.append(next(iter(runner.infer({"image": images[i:i + 1]}).values())))
    return np.concatenate(rows).astype(np.float64)


if __name__ == "__main__":
    main(sys.argv[1:])
