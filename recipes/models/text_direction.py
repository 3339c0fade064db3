"""Printed text lines, upright and turned 180°, as PP-OCR's direction classifier takes them,
for rpi.yaml.

The classifier (`ch_ppocr_mobile_v2.0_cls_infer.onnx` in the PyPI package
rapidocr-onnxruntime, Apache-2.0: a MobileNetV3-small at scale 0.35, PaddleOCR's) reads
one line at 48 × 192, `x` [N, 3, 48, 192] in −1..1, and answers [N, 2]: the line is
upright (class 0, PaddleOCR's label "0") or upside down (class 1, "180"). An OCR
pipeline turns a line it reads as "180" before recognizing it.

The lines are the text recognizer's phrases, rendered with Pillow's built-in font by
text_lines.py (seeded size, offset and ink), fitted to 192 wide as RapidOCR does (height
48, the width scaled with it, the rest padded with 0, mid-grey after normalization),
each once upright and once turned: the labels are 0 and 1 in turn. Deterministic for a
given Pillow; the same bytes on x86 and aarch64 (the rendering is FreeType's integer
arithmetic, checked by tests/integration/board).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))  # text_lines.py travels beside it
from text_lines import PHRASES, render

HEIGHT, WIDTH = 48, 192


def fitted(line: np.ndarray) -> np.ndarray:
    """A rendered 48 × 320 line cut to its text and 8 columns of paper each side (as a
    detector's box), at most 192 wide at height 48, normalized and padded: 3 × 48 × 192."""
    from PIL import Image

    ink = np.nonzero(line.min(axis=(0, 2)) < line.max())[0]
    used = line[:, max(int(ink[0]) - 8, 0): int(ink[-1]) + 9] if ink.size else line
    width = min(WIDTH, used.shape[1])
    image = Image.fromarray(used).resize((width, HEIGHT), Image.Resampling.BILINEAR)
    x = np.zeros((3, HEIGHT, WIDTH), dtype=np.float32)
    x[:, :, :width] = (np.asarray(image, dtype=np.float32).transpose(2, 0, 1) / 255 - 0.5) / 0.5
    return x


def lines(count: int = 16, seed: int = 1) -> tuple[dict[str, Any], np.ndarray]:
    """({x: 2·count × 3 × 48 × 192}, labels): each line upright (0), then turned (1)."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i in range(count):
        line = render(PHRASES[i % len(PHRASES)], rng)
        for turned in (0, 1):
            rows.append(fitted(np.ascontiguousarray(line[::-1, ::-1]) if turned else line))
            labels.append(turned)
    return {"x": np.stack(rows)}, np.asarray(labels, dtype=np.int64)
