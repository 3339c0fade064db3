"""Detection labels: YOLO txt folders and COCO JSON files, as boxes in model pixels.

Labels are written against the original photo; the model sees it after
preprocessing. Every image's boxes therefore go through the same geometry as its
pixels (`BoxTransform`, recorded by the image reader):

    photo pixels ──resize / letterbox scale──▶ ──+ pad offset / − crop offset──▶
        ──clip to the input──▶ x1, y1, x2, y2 in input pixels (what prepost emits)

A box clipped away entirely (outside a centre crop) is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from edgebuild.core.samples import ImageBoxes
from edgebuild.data.digest import ImageFile
from edgebuild.data.records import YOLO_HINT, CocoCategory, CocoImage, coco_file, yolo_box
from edgebuild.errors import DataError

YOLO_IGNORED = frozenset({"classes.txt"})  # the class-name list some tools write alongside


@dataclass(frozen=True)
class BoxTransform:
    """Photo pixels -> input pixels: `x * sx + dx`, `y * sy + dy`, clipped to width×height."""

    sx: float
    sy: float
    dx: float
    dy: float
    width: int
    height: int

    def then(self, sx: float, sy: float, dx: float, dy: float, width: int,
             height: int) -> BoxTransform:
        """This transform followed by another step (scale, shift, new canvas)."""
        return BoxTransform(self.sx * sx, self.sy * sy, self.dx * sx + dx, self.dy * sy + dy,
                            width, height)

    def apply(self, boxes: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Boxes N×4 (x1, y1, x2, y2, photo pixels) in input pixels; empty ones dropped."""
        out = boxes * np.array([self.sx, self.sy, self.sx, self.sy]) + \
            np.array([self.dx, self.dy, self.dx, self.dy])
        out = np.clip(out, 0.0, np.array([self.width, self.height, self.width, self.height],
                                         dtype=np.float64))
        keep = (out[:, 2] > out[:, 0]) & (out[:, 3] > out[:, 1])
        return out[keep], classes[keep]


def read_yolo(folder: Path, images: list[ImageFile], sizes: list[tuple[int, int]]
              ) -> list[ImageBoxes]:
    """Boxes in photo pixels of each image, from `<folder>/<relative name>.txt`.

    An image without a file has no objects (the YOLO convention); a folder none of
    whose files belongs to an image is an error (a wrong path or naming).
    """
    if not folder.is_dir():
        raise DataError(f"YOLO label folder {folder} does not exist",
                        "labels.path of format yolo is a folder of .txt files, one per image")
    out: list[ImageBoxes] = []
    used = 0
    for file, (width, height) in zip(images, sizes, strict=True):
        label = folder / PurePosixPath(file.relative).with_suffix(".txt")
        if not label.is_file():
            out.append(ImageBoxes.empty())
            continue
        used += 1
        out.append(_yolo_file(label, width, height))
    present = [f for f in folder.rglob("*.txt") if f.name not in YOLO_IGNORED]
    if present and not used:
        raise DataError(f"no YOLO label file in {folder} belongs to an image of the dataset "
                        f"(e.g. {present[0].name})",
                        "a label file is named as its image, relative to the image folder, "
                        "with the suffix .txt (images/a.png -> labels/a.txt)")
    return out


def _yolo_file(path: Path, width: int, height: int) -> ImageBoxes:
    boxes, classes = [], []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path.name} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                        YOLO_HINT) from None
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"{path.name}:{number}"
        if len(fields) != 5:
            raise DataError(f"{where}: {len(fields)} values; a YOLO box line is "
                            "`class cx cy w h`",
                            f"{YOLO_HINT}; polygon (segmentation) labels are not boxes: "
                            "convert them first")
        box = yolo_box(fields, where)
        cx, cy, w, h = box.cx, box.cy, box.w, box.h
        boxes.append([(cx - w / 2) * width, (cy - h / 2) * height,
                      (cx + w / 2) * width, (cy + h / 2) * height])
        classes.append(box.cls)
    if not boxes:
        return ImageBoxes.empty()
    return ImageBoxes(np.array(boxes, dtype=np.float64), np.array(classes, dtype=np.int64))


def coco_categories(categories: list[CocoCategory]) -> dict[int, int]:
    """COCO category id -> contiguous class index: ids in ascending order become 0..K-1.

    COCO's own ids have gaps (1..90 for 80 classes); a detector's head numbers its
    classes from 0 in the same order, which is what sorting the ids gives.
    """
    ids = [c.id for c in categories]
    if len(set(ids)) != len(ids):
        raise DataError("COCO categories repeat an id")
    return {cid: index for index, cid in enumerate(sorted(ids))}


def read_coco(path: Path, images: list[ImageFile], sizes: list[tuple[int, int]]
              ) -> list[ImageBoxes]:
    """Boxes in photo pixels of each image, from a COCO JSON file (matched by file_name)."""
    if not path.is_file():
        raise DataError(f"COCO label file {path} does not exist",
                        "labels.path of format coco is one .json file")
    document = coco_file(path.read_bytes(), path.name)
    classes = coco_categories(document.categories)
    by_name: dict[str, CocoImage] = {}
    ids: set[int] = set()
    for index, image in enumerate(document.images):
        if image.id in ids:
            raise DataError(f"{path.name}: images[{index}].id {image.id} is used by an earlier "
                            "image", "each image entry needs its own id")
        ids.add(image.id)
        by_name[image.file_name.replace("\\", "/")] = image
    rows: dict[int, list[tuple[list[float], int]]] = {}
    for index, ann in enumerate(document.annotations):
        if ann.iscrowd:
            continue  # a crowd region is neither to be found nor a false positive
        if ann.category_id not in classes:
            raise DataError(f"{path.name}: annotations[{index}] has category_id "
                            f"{ann.category_id}, which no entry of `categories` declares")
        x, y, w, h = ann.bbox
        rows.setdefault(ann.image_id, []).append(([x, y, x + w, y + h],
                                                  classes[ann.category_id]))
    out: list[ImageBoxes] = []
    used = 0
    for file, (width, height) in zip(images, sizes, strict=True):
        entry = by_name.get(file.relative)
        if entry is None:
            out.append(ImageBoxes.empty())
            continue
        used += 1
        declared = (entry.width, entry.height)
        if None not in declared and declared != (width, height):
            raise DataError(f"{path.name}: {entry.file_name} is declared {declared[0]}×"
                            f"{declared[1]}, the file is {width}×{height}",
                            "the labels were made for another version of the image")
        found = rows.get(entry.id, [])
        out.append(ImageBoxes(np.array([b for b, _ in found], dtype=np.float64).reshape(-1, 4),
                              np.array([c for _, c in found], dtype=np.int64))
                   if found else ImageBoxes.empty())
    if by_name and not used:
        raise DataError(f"no image of {path.name} is in the dataset (e.g. "
                        f"{next(iter(by_name))[:200]!r})",
                        "file_name is the image's path relative to its folder")
    return out
