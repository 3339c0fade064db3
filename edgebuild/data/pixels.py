"""An image's way to the model's input: resize, letterbox, crop, channels, normalization.

One file that imports only NumPy and Pillow (and nothing of edgebuild), because it runs
in two places: the `images` dataset loader prepares every gated image with it
(loaders._read_image), and a Triton repository's `preprocess` model carries a copy of
this very file (backends/triton/repository.py), so an image a server prepares is
prepared by the code the gates were measured with.

`pre` is anything with ImagePreprocess's fields as attributes: the recipe's model, or a
namespace made from its JSON. Errors are ValueError; the loader words them for users.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Where one step moved the pixels: x' = x * sx + dx, y' = y * sy + dy, on a w × h canvas.
Moved = tuple[float, float, float, float, int, int]


def placed(image: Any, pre: Any) -> tuple[Any, list[Moved]]:
    """A PIL image resized (shorter side), letterboxed and centre-cropped as `pre` says,
    and what each step did to pixel positions."""
    from PIL import Image

    moves: list[Moved] = []
    if pre.resize:
        w, h = image.size
        ratio = pre.resize / min(w, h)
        image = image.resize((max(1, round(w * ratio)), max(1, round(h * ratio))),
                             Image.Resampling.BILINEAR)
        moves.append((image.size[0] / w, image.size[1] / h, 0.0, 0.0, *image.size))
    if pre.letterbox:
        w, h = image.size
        image, (new_w, new_h, left, top) = letterbox_placed(
            image, pre.letterbox[0], pre.letterbox[1], pre.pad_value)
        moves.append((new_w / w, new_h / h, left, top, *image.size))
    if pre.center_crop:
        w, h = image.size
        c = pre.center_crop
        if c > min(w, h):
            raise ValueError(f"center_crop {c} is larger than the image {w}×{h}")
        left, top = (w - c) // 2, (h - c) // 2
        image = image.crop((left, top, left + c, top + c))
        moves.append((1.0, 1.0, -left, -top, c, c))
    return image, moves


def letterbox_placed(image: Any, height: int, width: int, pad_value: int
                     ) -> tuple[Any, tuple[int, int, int, int]]:
    """Scale a PIL image to fit height×width keeping its aspect ratio, pad the rest
    (centred); returns it and where the photo landed: (new width, new height, left, top).

    The scale and offsets are `min(height/h, width/w)` and half the padding (floored),
    the convention of YOLO-style detectors; a box in model pixels maps back to the
    photo as `(x - left) / scale`.
    """
    from PIL import Image

    w, h = image.size
    ratio = min(height / h, width / w)
    new_w, new_h = max(1, round(w * ratio)), max(1, round(h * ratio))
    resized = image.resize((new_w, new_h), Image.Resampling.BILINEAR)
    fill = pad_value if image.mode == "L" else (pad_value,) * 3
    canvas = Image.new(image.mode, (width, height), fill)
    left, top = (width - new_w) // 2, (height - new_h) // 2
    canvas.paste(resized, (left, top))
    return canvas, (new_w, new_h, left, top)


def model_input(image: Any, pre: Any) -> np.ndarray:
    """A placed PIL image (RGB or L) as one sample of the model's input (no batch axis):
    channels as `pre.color` says, then raw uint8 or normalized float32, in `pre.layout`."""
    array = np.asarray(image, dtype=np.float32)
    if array.ndim == 2:
        array = array[:, :, None]
    if pre.color == "bgr":
        array = array[:, :, ::-1]
    if pre.dtype == "uint8":
        raw = array if pre.layout == "NHWC" else array.transpose(2, 0, 1)
        return np.ascontiguousarray(raw, dtype=np.uint8)
    one: np.ndarray = normalized(array[None], pre)[0]
    return one


def normalized(x: np.ndarray, pre: Any) -> np.ndarray:
    """N×H×W×C raw values -> `(x * scale - mean) / std` per channel, float32, in
    `pre.layout`."""
    mean = np.asarray(pre.mean, dtype=np.float32)
    std = np.asarray(pre.std, dtype=np.float32)
    x = (x * np.float32(pre.scale) - mean) / std
    if pre.layout == "NCHW":
        x = x.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(x, dtype=np.float32)
