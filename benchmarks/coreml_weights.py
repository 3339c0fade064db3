"""Where the Core ML int8-weights error comes from, and what removes it (issue 31).

    PYTHONPATH=. python benchmarks/coreml_weights.py        # weights alone (fp32 compute)
    PYTHONPATH=. python benchmarks/coreml_weights.py --photos '{"weights": "int8",
        "granularity": "per_block", "block_size": 16, "minimum_deployment_target": "iOS18"}'

The quickstart model (EfficientNet-Lite0, pretrained) through the Core ML backend's
weight-compression proxy (edgebuild/backends/coreml/proxy.py: the build's compression
applied to the PyTorch weights, then fp16 compute, as the iphone targets' accuracy gate
runs it), compared with FP32 PyTorch on all 117 photos: the recipe's 91 `calibration`
photos and scikit-image's 26 `photos` (`photos`: the 26 alone, the quickstart's gate
set). Each argument is a target's `options:` (CoreMlOptions); one JSON line each, with
cosine, plain top-1 agreement and decided agreement at margin 0.2 (fidelity/metrics.py).
Not Core ML numerics: the proxy's (Core ML predicts only on macOS).

The default rows compute in fp32 (`compute_precision: fp32`): the weights' error alone,
in seconds per row. fp16 compute (the targets' default) runs PyTorch's fp16 CPU kernels,
~7 s a photo on an AVX2-only CPU: `--photos` runs only the 26.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SKIMAGE = 26  # the photos come first, then the 91 calibration photos
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The shared Q/DQ set's four float layers (recipes/quickstart.yaml, `&shared-int8`), as
# the quantize pass names them (ONNX): keep_float maps them to the PyTorch modules.
SHARED_FLOAT = ["/_conv_stem/Conv_output_0", "/_blocks.0/_depthwise_conv/Conv_output_0",
                "/_blocks.0/_project_conv/Conv", "/_blocks.1/_expand_conv/Conv"]
FP16 = {"weights": "none"}
INT8 = {"weights": "int8", "compute_precision": "fp32"}
IOS18 = {"minimum_deployment_target": "iOS18"}
DEFAULT: list[dict[str, Any]] = [
    {"compute_precision": "fp32", "weights": "none"}, INT8,
    {**INT8, "int8_mode": "linear"},
    {**INT8, "keep_float": SHARED_FLOAT},
    {**INT8, "int8_mode": "linear", "keep_float": SHARED_FLOAT},
    {**INT8, **IOS18, "granularity": "per_block", "block_size": 32},
    {**INT8, **IOS18, "granularity": "per_block", "block_size": 16},
    {**INT8, **IOS18, "granularity": "per_block", "block_size": 8},
    {**INT8, **IOS18, "granularity": "per_block", "block_size": 16, "keep_float": SHARED_FLOAT},
]


def main(args: list[str]) -> None:
    import torch

    from edgebuild.backends.coreml.options import CoreMlOptions
    from edgebuild.backends.coreml.proxy import compress_like_coreml
    from edgebuild.frontend.torch_model import build_torch_model
    from tests.integration.passes import efficientnet as en

    torch.set_num_threads(2)
    configs = [json.loads(a) for a in args if a != "--photos"] or DEFAULT
    model = build_torch_model(en.recipe_data()["model"], en.RECIPE.parent).eval()
    images = load_images()[:SKIMAGE if "--photos" in args else None]
    reference = run(model, images, half=False)
    print(json.dumps({"reference": "fp32 PyTorch", "photos": len(images)}), flush=True)
    for config in configs:
        started = time.monotonic()
        options = CoreMlOptions.model_validate(config)
        proxy, info = compress_like_coreml(model, options)
        half = options.compute_precision == "fp16"
        got = run(proxy.half() if half else proxy, images, half)
        print(json.dumps({"options": config, "compressed": info["compressed_weights"],
                          "kept_float": info["kept_float_weights"],
                          **score(got, reference),
                          "seconds": round(time.monotonic() - started)}), flush=True)


def load_images() -> np.ndarray:
    """scikit-image's 26 photos, then the 91 calibration photos (shared_qdq.py's order)."""
    from pydantic import TypeAdapter

    from edgebuild.data.loaders import load_dataset
    from edgebuild.recipe.datasets import DatasetSpec
    from tests.integration.passes import efficientnet as en

    held = en.photos(1000)
    spec = TypeAdapter(DatasetSpec).validate_python(en.recipe_data()["datasets"]["calibration"])
    calib = load_dataset(spec, en.RECIPE.parent, ["image"], "calibration")
    return np.concatenate([held.inputs["image"], calib.inputs["image"]])


def run(model: Any, images: np.ndarray, half: bool) -> np.ndarray:
    """fp16: one photo at a time, as the accuracy gate runs the proxy; fp32 in batches
    of 39 (a different summation order only: far below the weights' error)."""
    import torch

    outputs = []
    batch = 1 if half else 39
    with torch.no_grad():
        for i in range(0, len(images), batch):
            x = torch.from_numpy(images[i:i + batch])
            outputs.append(model(x.half() if half else x).float().numpy())
    return np.concatenate(outputs)


def score(got: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    from benchmarks.shared_qdq import _score
    from benchmarks.shared_qdq import score as both

    return both(got, reference) if len(got) > SKIMAGE else {"photos": _score(got, reference)}


if __name__ == "__main__":
    main(sys.argv[1:])
