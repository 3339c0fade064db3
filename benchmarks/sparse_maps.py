"""The sparse-decision gate on a real pretrained text detector (issue 40, item 3).

PP-OCRv4's DBNet text detector (`ch_PP-OCRv4_det_infer.onnx`, shipped in the PyPI package
rapidocr-onnxruntime) on the 12 document pages of recipes/data/doc-pages, FP32 and INT8
(ONNX Runtime static QDQ, MinMax), calibrated two ways: on the 6 pages of doc-pages-calib
(text, representative) and on 6 blank grey pages (no text: calibration never sees a
confident pixel). For each build: plain decision agreement (the old gate), the positive
region's recall and IoU (`min_region_recall`, `min_region_iou`), and the maps' peaks.

    PYTHONPATH=. python benchmarks/sparse_maps.py [--model PATH] [--threshold 0.3] [--peak 0.6]

The model path defaults to the installed rapidocr_onnxruntime's. Nothing is written
outside a temporary folder.
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def pages(folder: Path, size: tuple[int, int] = (608, 800)) -> np.ndarray:
    """Pages as DBNet takes them: RGB, (x / 255 - 0.5) / 0.5, NCHW, 608 × 800 (multiples of
    32, rapidocr's own normalisation)."""
    from PIL import Image

    found = []
    for path in sorted(folder.glob("*.jpg")):
        image = np.asarray(Image.open(path).convert("RGB").resize(size), np.float32)
        found.append(((image / 255 - 0.5) / 0.5).transpose(2, 0, 1))
    return np.stack(found)


def default_model() -> Path:
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("rapidocr_onnxruntime is not installed: pass --model")
    return Path(next(iter(spec.submodule_search_locations))) / "models" / \
        "ch_PP-OCRv4_det_infer.onnx"


def run(model: Path, images: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: x[None]})[0] for x in images])


def int8(model: Path, calibration: np.ndarray, out: Path) -> Path:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.rows = iter([{"x": x[None]} for x in calibration])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.rows, None)

    quantize_static(str(model), str(out), Reader(), quant_format=QuantFormat.QDQ)
    return out


def main() -> None:
    from edgebuild.fidelity.verdict import judge
    from edgebuild.recipe.accuracy import AccuracyGate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--threshold", type=float, default=0.3)  # DBNet's `thresh`
    parser.add_argument("--peak", type=float, default=0.6)
    args = parser.parse_args()
    model = args.model or default_model()
    test = pages(REPO / "recipes/data/doc-pages/images")
    text = pages(REPO / "recipes/data/doc-pages-calib/images")
    blank = np.full_like(text, (200 / 255 - 0.5) / 0.5)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        builds = {"FP32": model,
                  "INT8, calibrated on text pages": int8(model, text, work / "text.onnx"),
                  "INT8, calibrated on blank pages": int8(model, blank, work / "blank.onnx")}
        reference = run(model, test)
        np.savez(work / "ref.npz", **{"output:maps": reference})  # type: ignore[arg-type]
        print(f"{len(test)} pages, maps {list(reference.shape[1:])}; threshold "
              f"{args.threshold:g}, peak_threshold {args.peak:g}\n")
        print("| build | agreement (old gate) | region recall | region IoU | regions found "
              "| extra | map peak | verdict of `min_decision_agreement: 99` |")
        print("|---|---|---|---|---|---|---|---|")
        for name, path in builds.items():
            np.savez(work / "got.npz", **{"output:maps": run(path, test)})  # type: ignore[arg-type]
            regions = judge(AccuracyGate(
                dataset="pages", output="maps", task="dense", threshold=args.threshold,
                peak_threshold=args.peak, min_region_recall=95, min_region_iou=80),
                work / "got.npz", work / "ref.npz")
            old = judge(AccuracyGate(
                dataset="pages", output="maps", task="dense", threshold=args.threshold,
                min_decision_agreement=99), work / "got.npz", work / "ref.npz")
            m = {"region_recall": float("nan"), "region_iou": float("nan"), **regions.measured}
            print(f"| {name} | {m['decision_agreement']:.2f} % (FP32 positive "
                  f"{m['reference_positive']:.2f} %) | {m['region_recall']:.1f} % "
                  f"| {m['region_iou']:.1f} % | {int(m['regions_found'])} of "
                  f"{int(m['regions'])} | {int(m['extra_regions'])} | {m['peak']:.3f} | "
                  f"{'passed' if old else 'failed'} |")
            print(f"  regions gate: {'passed' if regions else 'failed'}: {regions.message}")
            print(f"  old gate: {old.message[:300]}")


if __name__ == "__main__":
    main()
