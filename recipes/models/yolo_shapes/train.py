"""Train the YOLOv8n shape detector that `recipes/yolo-detector.yaml` builds, and export it.

Why this exists: the YOLO-family recipe needs a detector with real, trained weights as
that family's own tooling exports it, and none ships in a package. This script trains
one on CPU with the `ultralytics` package's YOLOv8n architecture (3 classes: circle,
square, triangle) on scenes that ``make_dataset.py`` generates (train: seed 1, not
committed; val: ``recipes/data/yolo-shapes``, committed), then exports it the way that
tooling does: ``export(format="onnx", imgsz=256, opset=17, simplify=False,
dynamic=False)`` — one output ``[1, 4 + 3, 1344]`` (box centre and size in input pixels,
then per-class sigmoid scores) and the file's ``metadata_props`` (names, stride, ...).

ultralytics (AGPL-3.0) is a training-time tool only, never a dependency of edgebuild;
install it beside the environment, not into it (its torchvision wheel is a CUDA build:
``tvshim`` below gives torchvision's ``nms`` a pure-torch CPU kernel)::

    pip install --target /tmp/extra-yolo --no-deps ultralytics ultralytics-thop \\
        "torchvision==0.28.*" "opencv-python-headless<5" polars polars-runtime-32 \\
        matplotlib contourpy cycler fonttools kiwisolver python-dateutil
    PYTHONPATH=/tmp/extra-yolo python recipes/models/yolo_shapes/train.py \\
        --work /tmp/yolo-train --hours 0.35

About 21 minutes on 2 busy cores (AMD EPYC, AVX2); README.md has the shipped run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VAL = HERE.parents[1] / "data" / "yolo-shapes"
OUT = HERE / "yolov8_shapes.onnx"
IMGSZ = 256


def tvshim() -> None:
    """torchvision's `nms` op as pure torch, for a torchvision whose C++ ops cannot load
    (PyPI's wheel links CUDA's libraries; torch here is the CPU build)."""
    import importlib.util

    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        raise SystemExit("torchvision is needed by ultralytics (see the docstring)")
    try:
        torch.ops.load_library(str(Path(spec.origin).parent / "_C.so"))
        return  # its own ops load
    except OSError:
        pass
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")

    def nms(boxes: torch.Tensor, scores: torch.Tensor, iou: float) -> torch.Tensor:
        order = scores.argsort(descending=True)
        boxes = boxes[order]
        area = (boxes[:, 2:] - boxes[:, :2]).clamp(min=0).prod(1)
        suppressed = torch.zeros(len(order), dtype=torch.bool)
        keep = []
        for i in range(len(order)):
            if suppressed[i]:
                continue
            keep.append(i)
            low = torch.maximum(boxes[i, :2], boxes[i + 1:, :2])
            high = torch.minimum(boxes[i, 2:], boxes[i + 1:, 2:])
            inter = (high - low).clamp(min=0).prod(1)
            suppressed[i + 1:] |= inter / (area[i] + area[i + 1:] - inter) > iou
        return order[torch.tensor(keep, dtype=torch.long)]

    lib.impl("nms", nms, "CPU")
    globals()["_TV_LIB"] = lib  # the registration lives as long as the library object
    import torchvision.extension
    torchvision.extension._has_ops = lambda: True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/yolo-train"))
    parser.add_argument("--train-count", type=int, default=2000)
    parser.add_argument("--hours", type=float, default=0.35, help="training time budget")
    parser.add_argument("--epochs", type=int, default=60, help="upper bound; --hours rules")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--weights", type=Path, default=None,
                        help="start from this checkpoint (a last.pt of an earlier run)")
    parser.add_argument("--close-mosaic", type=int, default=2,
                        help="last epochs without mosaic augmentation")
    args = parser.parse_args()

    sys.path.insert(0, str(HERE))
    from make_dataset import CLASSES, write

    data = args.work / "data"
    if not (data / "train" / "images").is_dir():
        write("train", args.train_count, data / "train")
    if (data / "val").exists():
        shutil.rmtree(data / "val")
    shutil.copytree(VAL, data / "val", ignore=shutil.ignore_patterns("*.md", "*.cache"))
    names = "".join(f"  {i}: {name}\n" for i, name in enumerate(CLASSES))
    (args.work / "data.yaml").write_text(
        f"path: {data}\ntrain: train/images\nval: val/images\nnames:\n{names}")

    import torch
    torch.set_num_threads(2)
    tvshim()
    import ultralytics.data.utils
    from ultralytics import YOLO
    # It fetches a plotting font before training; offline, and plots are off anyway.
    ultralytics.data.utils.check_font = lambda *args, **kwargs: None
    model = YOLO(str(args.weights or HERE / "yolov8_shapes.yaml"))
    model.train(data=str(args.work / "data.yaml"), imgsz=IMGSZ, epochs=args.epochs,
                time=args.hours, batch=32, workers=1, device="cpu", amp=False, seed=0,
                deterministic=True, plots=False, cache="ram", project=str(args.work),
                name="run", exist_ok=True, close_mosaic=args.close_mosaic, patience=1000,
                verbose=True)
    metrics = model.val(data=str(args.work / "data.yaml"), imgsz=IMGSZ, batch=16,
                        device="cpu", plots=False)
    print(f"val mAP@0.5 {metrics.box.map50:.4f}  mAP@0.5:0.95 {metrics.box.map:.4f}")
    exported = Path(model.export(format="onnx", imgsz=IMGSZ, opset=17, simplify=False,
                                 dynamic=False))
    shutil.copyfile(exported, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
