"""Generate the offline detection set the YOLO-family recipe is trained and gated on.

Why this exists: no YOLO detector with real weights ships on PyPI, and no labelled
detection set reaches these machines. So the project trains its own (``train.py``
beside this file) on scenes made here: coloured shapes (circle, square, triangle)
pasted on crops of the natural photos that scikit-image ships, with YOLO txt labels.

Every scene is a function of ``(seed, index)`` only (NumPy's PCG64 generator, Pillow's
drawing, no threads), so the same call writes the same files on every machine. The
committed validation set (``recipes/data/yolo-shapes``, 48 JPEGs) is::

    python recipes/models/yolo_shapes/make_dataset.py --split val --count 48 \
        --out recipes/data/yolo-shapes

and ``train.py`` writes the training set (seed 1, not committed) the same way.

A scene: a random crop of one photo (flipped, colour-jittered) at one of four sizes
(landscape, portrait, square: the recipe letterboxes them), 1-6 objects of 14-110
pixels, each a flat or shaded colour, rotated, partly transparent at times, never
hiding more than a third of another object. Labels are ``class cx cy w h``
normalised to the image, the tight box of the drawn shape.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = ("circle", "square", "triangle")
SEEDS = {"val": 0, "train": 1, "calib": 2}
SIZES = ((320, 240), (256, 256), (240, 320), (288, 224))  # width, height
PHOTOS = ("astronaut.png", "brick.png", "camera.png", "chelsea.png", "coffee.png",
          "coins.png", "grass.png", "gravel.png", "hubble_deep_field.jpg", "ihc.png",
          "moon.png", "motorcycle_left.png", "page.png", "retina.jpg", "rocket.jpg",
          "text.png", "horse.png", "cell.png")
SUPERSAMPLE = 4  # shapes drawn at 4x and reduced: anti-aliased edges


def load_backgrounds() -> list[np.ndarray]:
    """scikit-image's packaged photos as RGB uint8 arrays (grey ones replicated)."""
    import skimage

    folder = Path(skimage.__file__).parent / "data"
    out = []
    for name in PHOTOS:
        image = np.asarray(Image.open(folder / name).convert("RGB"))
        out.append(image)
    return out


def background(rng: np.random.Generator, photos: list[np.ndarray], width: int,
               height: int) -> Image.Image:
    """A random crop of a random photo, resized to width x height and jittered."""
    photo = photos[int(rng.integers(len(photos)))]
    ph, pw = photo.shape[:2]
    scale = rng.uniform(0.35, 1.0)
    cw = max(32, int(min(pw, ph * width / height) * scale))
    ch = max(32, int(cw * height / width))
    x0 = int(rng.integers(0, pw - cw + 1))
    y0 = int(rng.integers(0, ph - ch + 1))
    crop = photo[y0:y0 + ch, x0:x0 + cw]
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    image = Image.fromarray(np.ascontiguousarray(crop)).resize((width, height),
                                                               Image.Resampling.BILINEAR)
    pixels = np.asarray(image).astype(np.float32)
    gain = rng.uniform(0.7, 1.3, size=3).astype(np.float32)   # per-channel colour cast
    pixels = np.clip(pixels * gain + rng.uniform(-25, 25), 0, 255)
    return Image.fromarray(pixels.astype(np.uint8))


def _polygon(cls: int, cx: float, cy: float, r: float, angle: float) -> list[tuple[float, float]]:
    corners = 4 if cls == 1 else 3
    start = angle + (math.pi / 4 if cls == 1 else -math.pi / 2)
    return [(cx + r * math.cos(start + 2 * math.pi * k / corners),
             cy + r * math.sin(start + 2 * math.pi * k / corners)) for k in range(corners)]


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return inter / smaller if smaller > 0 else 0.0


def scene(seed: int, index: int, photos: list[np.ndarray]
          ) -> tuple[Image.Image, list[tuple[int, float, float, float, float]]]:
    """The image and its YOLO rows (class, cx, cy, w, h normalised) of scene `index`."""
    rng = np.random.default_rng([seed, index])
    width, height = SIZES[int(rng.integers(len(SIZES)))]
    image = background(rng, photos, width, height).convert("RGBA")
    boxes: list[tuple[float, ...]] = []
    rows = []
    for _ in range(int(rng.integers(1, 7))):
        for _attempt in range(10):
            cls = int(rng.integers(len(CLASSES)))
            size = rng.uniform(14, 110)            # the shape's extent in pixels
            r = size / 2
            cx = rng.uniform(r, width - r)
            cy = rng.uniform(r, height - r)
            angle = rng.uniform(0, 2 * math.pi)
            if cls == 0:
                # an ellipse, up to 1.3:1, axis-aligned
                rx, ry = r, r * rng.uniform(0.77, 1.0)
                if rng.random() < 0.5:
                    rx, ry = ry, rx
                box = (cx - rx, cy - ry, cx + rx, cy + ry)
                points = None
            else:
                points = _polygon(cls, cx, cy, r, angle)
                xs, ys = zip(*points, strict=True)
                box = (min(xs), min(ys), max(xs), max(ys))
            if all(_iou(box, other) < 0.33 for other in boxes):
                break
        else:
            continue
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        alpha = 255 if rng.random() < 0.8 else int(rng.integers(150, 230))
        # drawn at 4x on the shape's own patch, reduced, and composited in place
        x0, y0 = max(0, int(box[0]) - 2), max(0, int(box[1]) - 2)
        x1, y1 = min(width, int(box[2]) + 3), min(height, int(box[3]) + 3)
        layer = Image.new("RGBA", ((x1 - x0) * SUPERSAMPLE, (y1 - y0) * SUPERSAMPLE),
                          (0, 0, 0, 0))
        draw = ImageDraw.Draw(layer)
        outline = (*(int(c) for c in rng.integers(0, 256, size=3)), alpha)
        line = int(rng.integers(0, 3)) * SUPERSAMPLE
        if points is None:
            scaled = [(box[0] - x0) * SUPERSAMPLE, (box[1] - y0) * SUPERSAMPLE,
                      (box[2] - x0) * SUPERSAMPLE, (box[3] - y0) * SUPERSAMPLE]
            draw.ellipse(scaled, fill=(*colour, alpha), outline=outline, width=line)
        else:
            draw.polygon([((x - x0) * SUPERSAMPLE, (y - y0) * SUPERSAMPLE) for x, y in points],
                         fill=(*colour, alpha), outline=outline, width=line)
        image.alpha_composite(layer.resize((x1 - x0, y1 - y0), Image.Resampling.LANCZOS),
                              dest=(x0, y0))
        boxes.append(box)
        x1, y1, x2, y2 = (max(0.0, box[0]), max(0.0, box[1]), min(width, box[2]),
                          min(height, box[3]))
        rows.append((cls, (x1 + x2) / 2 / width, (y1 + y2) / 2 / height,
                     (x2 - x1) / width, (y2 - y1) / height))
    out = image.convert("RGB")
    if rng.random() < 0.3:
        out = out.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.2)))
    noise = rng.normal(0, rng.uniform(0, 6), size=(height, width, 3))
    pixels = np.clip(np.asarray(out).astype(np.float32) + noise, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels), rows


def write(split: str, count: int, out: Path, quality: int = 90) -> None:
    """Write `count` scenes of `split` to `out/images/*.jpg` and `out/labels/*.txt`."""
    photos = load_backgrounds()
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "labels").mkdir(parents=True, exist_ok=True)
    for index in range(count):
        image, rows = scene(SEEDS[split], index, photos)
        stem = f"{split}_{index:05d}"
        image.save(out / "images" / f"{stem}.jpg", quality=quality)
        text = "".join(f"{c} {x:.6f} {y:.6f} {w:.6f} {h:.6f}\n" for c, x, y, w, h in rows)
        (out / "labels" / f"{stem}.txt").write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=sorted(SEEDS), required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    write(args.split, args.count, args.out)


if __name__ == "__main__":
    main()
