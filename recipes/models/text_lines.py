"""Printed text lines as PP-OCRv4's recognizer takes them, for text-recognizer.yaml.

The recognizer (`ch_PP-OCRv4_rec_infer.onnx` in the PyPI package rapidocr-onnxruntime,
Apache-2.0; a PaddleOCR CRNN-style network: convolutional features, a sequence encoder,
a CTC head) reads one line of text at height 48: `x` [1, 3, 48, W] in −1..1, and
returns per-step class probabilities `[1, W / 8, 6625]` (class 0 the CTC blank, then
the 6,623 characters its metadata lists, then the space).

The lines are rendered here with Pillow's built-in font (no font package, no download):
the phrases below, each at a size, offset and ink of its own (seeded), black on a light
background, resized to the model's 48 × 320. Deterministic for a given Pillow.
"""

from __future__ import annotations

from typing import Any

import numpy as np

HEIGHT, WIDTH = 48, 320
PHRASES = (
    "edge models 2026", "Hello World", "build 42 passed", "latency 3.5 ms",
    "INT8 you can trust", "Jetson Orin Nano", "Snapdragon 8 Gen 3", "model.onnx",
    "accuracy 99.2 %", "the quick brown fox", "jumps over 13 dogs", "ReLU6 and Clip",
    "batch size 1", "OpenVINO 2026.4", "TFLite + NNAPI", "Core ML on iPhone",
    "cosine 0.9995", "p50 1.62 ms", "Raspberry Pi 5", "queue depth 8",
    "calibration set", "per-channel scales", "NMS at 0.45", "recipe.yaml",
    "Fashion MNIST", "ImageNet top-1", "size 4.7 MB", "gate passed",
    "warm-up 20 runs", "seed 1234", "layer norm", "GELU tanh",
)


def render(text: str, rng: np.random.Generator) -> np.ndarray:
    """One line as uint8 HWC RGB, HEIGHT × WIDTH."""
    from PIL import Image, ImageDraw, ImageFont

    size = int(rng.integers(26, 34))
    font = ImageFont.load_default(size=size)
    paper = int(rng.integers(215, 256))
    ink = int(rng.integers(0, 60))
    _, top, right, bottom = font.getbbox(text)
    canvas = Image.new("RGB", (right + 16, HEIGHT), (paper,) * 3)
    y = (HEIGHT - (bottom - top)) // 2 - top + int(rng.integers(-3, 4))
    ImageDraw.Draw(canvas).text((8 + int(rng.integers(0, 6)), y), text, fill=(ink,) * 3,
                                font=font)
    if canvas.width > WIDTH:  # squeeze a long line to the width the model takes
        canvas = canvas.resize((WIDTH, HEIGHT), Image.Resampling.BILINEAR)
    line = Image.new("RGB", (WIDTH, HEIGHT), (paper,) * 3)
    line.paste(canvas, (0, 0))
    return np.asarray(line)


def lines(count: int = len(PHRASES), seed: int = 0) -> tuple[dict[str, Any], np.ndarray]:
    """({x: N×3×48×320 float32 in −1..1}, labels): PaddleOCR's `(pixel / 255 − 0.5) / 0.5`;
    each line's text as the recognizer's class indices, padded with −1 (a CTC gate's
    `max_cer_labels`)."""
    rng = np.random.default_rng(seed)
    texts = [PHRASES[i % len(PHRASES)] for i in range(count)]
    images = np.stack([render(text, rng) for text in texts])
    x = (images.astype(np.float32) / 255.0 - 0.5) / 0.5
    return {"x": np.ascontiguousarray(x.transpose(0, 3, 1, 2))}, encode(texts)


def classes() -> list[str]:
    """The recognizer's classes, as its ONNX file's metadata lists them: the blank, the
    6,623 characters of `character`, then the space (PaddleOCR's `use_space_char`)."""
    import importlib.util
    from pathlib import Path

    import onnx

    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    assert spec is not None and spec.origin is not None, "rapidocr-onnxruntime is missing"
    model = onnx.load(str(Path(spec.origin).parent / "models" / "ch_PP-OCRv4_rec_infer.onnx"),
                      load_external_data=False)
    (listed,) = [p.value for p in model.metadata_props if p.key == "character"]
    return ["<blank>", *listed.split("\n"), " "]


def encode(texts: list[str]) -> np.ndarray:
    """Each text as class indices, one row a text, padded with −1."""
    index = {c: i for i, c in enumerate(classes()) if i}
    rows = np.full((len(texts), max(map(len, texts))), -1, dtype=np.int64)
    for row, text in enumerate(texts):
        rows[row, :len(text)] = [index[c] for c in text]
    return rows
