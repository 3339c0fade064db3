"""The fidelity budget on EfficientNet-Lite0: gate cosine >= 0.995 and decided agreement
>= 99 % (margin 0.2) on all 117 photos (docs/benchmarks.md).

    PYTHONPATH=. python benchmarks/budget_efficientnet.py \
        '["percentile", "reduce_range", "bias_correction", "equalize", "keep_float"]'

Prints the budget's record (every trial, the choice and why) as JSON, or its failure.
"""
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pydantic import TypeAdapter

from edgebuild.data.loaders import Samples, load_dataset
from edgebuild.errors import StageError
from edgebuild.quant.params import QuantizeParams
from edgebuild.quant.search import budget as qb
from edgebuild.recipe.datasets import DatasetSpec
from tests.integration.passes import efficientnet as en

fp32 = en._exported()
held = en.photos(1000)
spec = TypeAdapter(DatasetSpec).validate_python(en.recipe_data()["datasets"]["calibration"])
calib = load_dataset(spec, en.RECIPE.parent, ["image"], "calibration")
photos = Samples({"image": np.concatenate([held.inputs["image"], calib.inputs["image"]])}, None,
                 list(held.names) + list(calib.names), None)
steps = json.loads(sys.argv[1]) if len(sys.argv) > 1 else None
budget = {"gate": {"dataset": "photos", "min_cosine": 0.995, "min_decided_agreement": 99,
                   "margin": 0.2}, "max_iterations": 6, "max_seconds": 3000}
if steps:
    budget["steps"] = steps
p = QuantizeParams.model_validate({"mode": "static", "calibration": "calibration",
                                   "budget": budget})
t = time.time()
with tempfile.TemporaryDirectory() as work:
    try:
        _, chosen, record = qb.search(fp32, Path(work) / "chosen.onnx", p, calib, photos,
                                      Path(work))
        print(json.dumps(record, indent=1))
    except StageError as exc:
        print("FAILED:", exc.message, "\nHINT:", exc.hint)
print("seconds", round(time.time() - t))
