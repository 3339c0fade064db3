"""Is model B faster than model A on this machine? Two ONNX files, timed interleaved.

    python benchmarks/ab.py A.onnx B.onnx [--threads 2] [--seconds 5]

Uses the regression gate's own protocol (edgebuild.gates.regression): blocks of
runs alternating A and B in one process, per-block ratios, a bootstrap 95 %
interval. Separate, sequential measurements on a shared machine can disagree
by more than the difference being measured; interleaving cancels the drift.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from edgebuild.gates.regression import decide
from edgebuild.measure.timing import time_pair
from edgebuild.recipe.common import MeasureSettings


def session(path: str, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def feed(model: Any) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape])
            .astype(np.float32) for i in model.get_inputs()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    a, b = session(args.a, args.threads), session(args.b, args.threads)
    fa, fb = feed(a), feed(b)
    settings = MeasureSettings(warmup_iterations=50, min_iterations=1000,
                               min_seconds=args.seconds)
    base, cand = time_pair(lambda: a.run(None, fa), lambda: b.run(None, fb), settings)
    verdict = decide(base, cand, threshold=0.0)
    print(f"A p50 {np.median(base):.4f} ms, B p50 {np.median(cand):.4f} ms over {len(base)} "
          f"block pairs; B/A = {verdict.ratio:.3f} [95 % CI {verdict.low:.3f}–{verdict.high:.3f}]"
          f" -> B is {1 / verdict.ratio:.2f}x {'faster' if verdict.ratio < 1 else 'slower'}")


if __name__ == "__main__":
    main()
