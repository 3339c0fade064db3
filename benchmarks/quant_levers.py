"""What each quantization lever contributes on EfficientNet-Lite0, on this machine.

    python benchmarks/quant_levers.py [--model fp32.onnx] [--rounds 60] [--threads 2]
                                      [--only NAME ...] [--json out.json] [--no-torch]

Builds the quickstart model (recipes/quickstart.yaml: `export-onnx` +
`onnx-optimize`, or `--model`), then quantizes it once per row of LEVERS with
the `quantize` pass's own code (edgebuild/quant/prepare.py) and reports:

- top-1 agreement with the FP32 model on the *calibration* photos and on the
  *held-out* photos, and the mean cosine of the logits on the held-out ones.
  Calibration: every other photo of Debian `opencv-doc` (46); held-out: the
  other 45 plus the 26 of scikit-image (71). One held-out photo is 1.4 points.
- Conv/Gemm layers computing in float (of 50);
- latency relative to ONNX Runtime FP32 (and PyTorch eager), all candidates
  timed in one process, round-robin blocks with the regression gate's settle
  pause, ratio = median over rounds of per-round block-median ratios with a
  bootstrap 95 % interval (edgebuild.gates.regression.decide). Sessions use
  ONNX Runtime's default optimization level (`all`), as the host-cpu target.

Agreement is computed on the models *as ONNX Runtime runs them* (integer
kernels): on an AVX2 CPU without VNNI that is not what the QDQ graph says
(docs/passes.md, "Quantization levers").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from edgebuild.data.loaders import Samples, load_dataset  # noqa: E402
from edgebuild.gates.regression import decide  # noqa: E402
from edgebuild.measure.timing import BLOCK, time_blocks  # noqa: E402
from edgebuild.recipe.common import MeasureSettings  # noqa: E402
from edgebuild.recipe.datasets import ImageFolder  # noqa: E402

PREPROCESS = {"resize": 256, "center_crop": 224, "mean": [127, 127, 127],
              "std": [128, 128, 128]}
OPENCV = "/usr/share/doc/opencv-doc/examples/data"
STATIC = {"mode": "static", "calibration": "photos"}
AUTO_BC = {**STATIC, "reduce_range": "auto", "bias_correction": True}

# name -> quantize params (None: the FP32 model itself). Each row changes one thing
# against the row it names in its comment, so the table reads as a sequence of levers.
LEVERS: dict[str, dict[str, Any] | None] = {
    "fp32": None,
    "per-tensor minmax": {**STATIC, "per_channel": False},
    "per-channel minmax (ORT default QDQ)": dict(STATIC),
    "calibration: 8 photos": {**STATIC, "calibration_samples": 8},
    "calibration: percentile 99.999": {**STATIC, "method": "percentile"},
    "calibration: entropy": {**STATIC, "method": "entropy"},
    "reduce_range: true (7-bit weights)": {**STATIC, "reduce_range": True},
    "reduce_range: auto": {**STATIC, "reduce_range": "auto"},
    "CLE exact (ReLU6 kept)": {**STATIC, "equalize": {"clip": "exact"}},
    "CLE relu (paper: ReLU6 -> ReLU)": {**STATIC, "equalize": {"clip": "relu"}},
    "bias correction": {**STATIC, "bias_correction": True},
    "reduce_range true + bias correction": {**STATIC, "reduce_range": True,
                                            "bias_correction": True},
    "reduce_range auto + bias correction": dict(AUTO_BC),
    "  + CLE exact": {**AUTO_BC, "equalize": {"clip": "exact"}},
    "  + keep_activations": {**AUTO_BC, "keep_activations": True},
    "  + Gemm in float": {**AUTO_BC, "exclude_nodes": ["/_fc/Gemm"]},
    "  + stem..block 3 in float (12 nodes)": {**AUTO_BC, "exclude_nodes": "PREFIX12"},
    "  + accuracy_aware max_drop 1": {**AUTO_BC, "accuracy_aware": {
        "dataset": "photos", "max_drop": 1.0, "max_iterations": 14, "max_seconds": 1800}},
}


def photos() -> tuple[Samples, Samples]:
    """(calibration, held-out): opencv-doc photos split alternately; skimage held out."""
    def load(path: Any) -> Samples:
        spec = ImageFolder.model_validate({"kind": "images", "path": path,
                                           "patterns": ["*.png", "*.jpg"],
                                           "preprocess": PREPROCESS})
        return load_dataset(spec, REPO, ["image"])

    opencv, skimage = load(OPENCV), load({"package": "skimage", "path": "data"})
    x = opencv.inputs["image"]
    calibration = Samples({"image": x[::2]}, None, opencv.names[::2])
    held = Samples({"image": np.concatenate([skimage.inputs["image"], x[1::2]])}, None,
                   skimage.names + opencv.names[1::2])
    return calibration, held


def quickstart() -> tuple[dict[str, Any], Path]:
    """The quickstart recipe as a worker sees it, and its folder."""
    from edgebuild.recipe.loader import load_recipe

    loaded = load_recipe(REPO / "recipes" / "quickstart.yaml")
    return loaded.recipe.model_dump(mode="json", include={"model", "inputs", "outputs",
                                                          "datasets"}), loaded.base_dir


def export_fp32(out: Path) -> Path:
    """The quickstart recipe's model through edgebuild's own export-onnx + onnx-optimize."""
    from edgebuild.core.artifact import Artifact
    from edgebuild.execute.worker import context_from_recipe
    from edgebuild.passes.export_onnx import ExportOnnx, ExportParams
    from edgebuild.passes.onnx_optimize import OnnxOptimize, OptimizeParams

    recipe, recipe_dir = quickstart()
    for step, op, params, inputs in (
            ("export", ExportOnnx(), ExportParams(opset=17), {}),
            ("optimize", OnnxOptimize(), OptimizeParams(), {"model": "export"})):
        folder = out / step
        folder.mkdir(parents=True, exist_ok=True)
        arts = {k: Artifact("0" * 64, "onnx", out / v, {}, {}, {"main": "model.onnx"})
                for k, v in inputs.items()}
        op.run(context_from_recipe(step, arts, folder, recipe, recipe_dir), params)
    return out / "optimize" / "model.onnx"


def session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def logits(path: Path, samples: Samples) -> np.ndarray:
    s = session(path, 1)
    x = samples.inputs["image"]
    return np.concatenate([s.run(None, {"image": x[i:i + 1]})[0] for i in range(len(x))]) \
        .astype(np.float64)


def agreement(reference: np.ndarray, got: np.ndarray) -> tuple[float, float]:
    top1 = 100.0 * float(np.mean(reference.argmax(1) == got.argmax(1)))
    cosine = float(np.mean(np.sum(reference * got, 1) / np.linalg.norm(reference, axis=1)
                           / np.linalg.norm(got, axis=1)))
    return top1, cosine


def float_layers(path: Path) -> int:
    """Conv/Gemm nodes whose weight is still a float32 initializer (they compute in float)."""
    import onnx

    graph = onnx.load(str(path)).graph
    floats = {i.name for i in graph.initializer if i.data_type == 1}
    return sum(1 for n in graph.node if n.op_type in ("Conv", "Gemm") and n.input[1] in floats)


def build(name: str, params: dict[str, Any], source: Path, calibration: Samples,
          out: Path) -> tuple[Path, dict[str, Any]]:
    import onnx

    from edgebuild.quant.params import QuantizeParams
    from edgebuild.quant.prepare import prepare, quantize_prepared
    from edgebuild.quant.samples import first
    from edgebuild.quant.search import accuracy_aware
    from edgebuild.quant.search.sensitivity import QUANTIZABLE

    if params.get("exclude_nodes") == "PREFIX12":
        graph = onnx.load(str(source)).graph
        params = {**params, "exclude_nodes": [n.name for n in graph.node
                                              if n.op_type in QUANTIZABLE][:12]}
    p = QuantizeParams.model_validate(params)
    destination = out / f"{len(list(out.glob('*.onnx')))}.onnx"
    # ONNX Runtime's calibrators print progress to stdout, which carries the table.
    with tempfile.TemporaryDirectory(prefix="quant-levers-") as work, \
            contextlib.redirect_stdout(sys.stderr):
        scratch = Path(work)
        started = time.monotonic()
        calib = calibration if p.calibration_samples >= len(calibration) else \
            first(calibration, p.calibration_samples)
        prepared = prepare(source, p, calib, scratch)
        meta: dict[str, Any] = {}
        if p.accuracy_aware is not None:
            meta = accuracy_aware.accuracy_aware(prepared, destination, p, calib, calibration,
                                                 scratch)
        else:
            quantize_prepared(prepared, destination, p, calib, p.exclude_nodes, scratch)
        meta.update(prepared.metadata, seconds=round(time.monotonic() - started, 1))
    print(f"  built {name} in {meta['seconds']} s", file=sys.stderr, flush=True)
    return destination, meta


def time_round_robin(runs: dict[str, Any], rounds: int) -> dict[str, np.ndarray]:
    """Per candidate: `rounds` (at least 8) blocks of BLOCK timed calls, candidates rotated
    each round — the search's own interleaved timing (edgebuild.measuring.select)."""
    settings = MeasureSettings(warmup_iterations=10, min_iterations=rounds * BLOCK,
                               max_iterations=rounds * BLOCK, min_seconds=0)
    blocks = time_blocks(list(runs.values()), settings)
    return dict(zip(runs, blocks, strict=True))


def torch_runner(threads: int) -> Any:
    import torch

    from edgebuild.passes.torch_model import build_torch_model

    torch.set_num_threads(threads)
    recipe, recipe_dir = quickstart()
    model = build_torch_model(recipe["model"], recipe_dir)
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 3, 224, 224))
                         .astype(np.float32))

    def run() -> Any:
        with torch.inference_mode():
            return model(x)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="FP32 ONNX (default: export the quickstart)")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="row names to build (fp32 is always kept)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="quant-levers-"))
    try:
        source = args.model or export_fp32(work / "fp32")
        calibration, held = photos()
        reference = {"calib": logits(source, calibration), "held": logits(source, held)}
        rows: dict[str, dict[str, Any]] = {}
        models: dict[str, Path] = {}
        for name, params in LEVERS.items():
            if params is not None and args.only and name not in args.only:
                continue
            path, meta = (source, {}) if params is None else \
                build(name, params, source, calibration, work)
            models[name] = path
            calib_top1, _ = agreement(reference["calib"], logits(path, calibration))
            held_top1, held_cos = agreement(reference["held"], logits(path, held))
            rows[name] = {"calibration_top1": calib_top1, "held_out_top1": held_top1,
                          "held_out_cosine": held_cos, "float_layers": float_layers(path),
                          "meta": meta}
        feed = {"image": held.inputs["image"][:1]}
        sessions = {name: session(path, args.threads) for name, path in models.items()}
        runs: dict[str, Any] = {name: (lambda s=s: s.run(None, feed))
                                for name, s in sessions.items()}
        if not args.no_torch:
            runs["PyTorch eager fp32"] = torch_runner(args.threads)
        blocks = time_round_robin(runs, args.rounds)
        for name, row in [*rows.items(), ("PyTorch eager fp32", {})]:
            if name not in blocks:
                continue
            verdict = decide(blocks["fp32"], blocks[name], threshold=0.0)
            row.update(p50_ms=float(np.median(blocks[name])), vs_ort_fp32=verdict.ratio,
                       vs_ort_fp32_ci95=[verdict.low, verdict.high])
            if "PyTorch eager fp32" in blocks:
                row["vs_pytorch"] = decide(blocks["PyTorch eager fp32"], blocks[name],
                                           threshold=0.0).ratio
            rows[name] = row
        print_table(rows, len(calibration), len(held))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2, default=str))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def print_table(rows: dict[str, dict[str, Any]], calibration: int, held: int) -> None:
    print(f"| lever | agreement, calibration ({calibration}) | agreement, held-out ({held}) "
          "| cosine, held-out | float Conv/Gemm (of 50) | latency / ORT FP32 [95 % CI] "
          "| latency / PyTorch | p50 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        top = f"{row['calibration_top1']:.1f} %" if "calibration_top1" in row else "—"
        held_top = f"{row['held_out_top1']:.1f} %" if "held_out_top1" in row else "—"
        cos = f"{row['held_out_cosine']:.4f}" if "held_out_cosine" in row else "—"
        floats = str(row.get("float_layers", "—"))
        ratio = "—"
        if "vs_ort_fp32" in row:
            low, high = row["vs_ort_fp32_ci95"]
            ratio = f"{row['vs_ort_fp32']:.2f} [{low:.2f}–{high:.2f}]"
        torch_ratio = f"{row['vs_pytorch']:.2f}" if "vs_pytorch" in row else "—"
        p50 = f"{row['p50_ms']:.2f}" if "p50_ms" in row else "—"
        print(f"| {name.strip()} | {top} | {held_top} | {cos} | {floats} | {ratio} "
              f"| {torch_ratio} | {p50} |")


if __name__ == "__main__":
    main()
