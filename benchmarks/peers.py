"""EfficientNet-Lite0: the peers a user would pick, and edgebuild's artifacts, in one process.

    python benchmarks/peers.py [--report build/<recipe>/report.json ...]
                               [--artifact NAME=path/model.onnx[@profile] ...]
                               [--rounds 120] [--threads 2] [--json out.json] [--quick]

The peers are each tool's default path, built here from the quickstart
recipe's model (recipes/quickstart.yaml, exported by edgebuild's own
`export-onnx`): PyTorch eager FP32; ONNX Runtime with default session options
on the FP32 ONNX; ONNX Runtime `quantize_static` (QDQ, MinMax, per-channel,
other arguments default); OpenVINO with its default config (no precision
hint), OpenVINO with INFERENCE_PRECISION_HINT=f32, and OpenVINO INT8 from
`nncf.quantize` with its defaults. INT8 peers calibrate on the photo set.
edgebuild's artifacts come from `--report` (each target's final artifact, run
with that target's backend options) and `--artifact`.

Latency: every candidate is loaded once, warmed up, then timed in round-robin
blocks — each round runs BLOCK timed calls of every candidate, the order
rotated each round, with the regression gate's settle pause before each
block (edgebuild.gates.regression). Drift of a shared machine then hits every
candidate alike; a candidate's ratio to PyTorch eager (or ONNX Runtime FP32)
is the median over rounds of the per-round ratio of block medians, with a
bootstrap 95 % interval (regression.decide). p50/p90 pool every timed call.
All use `--threads` threads, batch 1, 1×3×224×224, one real photo as input.

Agreement: top-1 agreement and mean cosine of the logits against FP32
PyTorch on every photo of scikit-image and Debian `opencv-doc` (117 images;
fewer with `--quick`), computed by the accuracy gate's own code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgebuild.backends.base import Runner
from edgebuild.core.artifact import Artifact
from edgebuild.core.target import Target
from edgebuild.data.loaders import Samples
from edgebuild.errors import EdgebuildError
from edgebuild.execute.worker import context_from_recipe
from edgebuild.fidelity.compare import accuracy_metrics
from edgebuild.fidelity.outputs import save_outputs
from edgebuild.gates.regression import decide
from edgebuild.measure.conditions import CpuMeter, conditions
from edgebuild.measure.stats import summarize
from edgebuild.measure.timing import BLOCK, time_blocks
from edgebuild.recipe.common import MeasureSettings
from edgebuild.recipe.loader import load_profiles, load_recipe, profile_dirs
from edgebuild.registry import load_backend

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "quickstart.yaml"
OPENCV_PHOTOS = "/usr/share/doc/opencv-doc/examples/data"
PHOTOS = {
    "kind": "images",
    "path": [{"package": "skimage", "path": "data"}, OPENCV_PHOTOS],
    "patterns": ["*.png", "*.jpg"],
    "preprocess": {"resize": 256, "center_crop": 224, "mean": [127, 127, 127],
                   "std": [128, 128, 128]},
}
EAGER, ORT_FP32 = "PyTorch eager fp32", "ONNX Runtime default, fp32 ONNX"

Infer = Callable[[dict[str, np.ndarray]], np.ndarray]  # feeds -> first output


@dataclass
class Candidate:
    name: str
    kind: str  # peer | edgebuild
    infer: Infer
    source: str = ""
    blocks: np.ndarray = field(default_factory=lambda: np.zeros((0, BLOCK)))
    accuracy: dict[str, float] = field(default_factory=dict)


# --- building the peers ------------------------------------------------------------------


def load_quickstart(threads: int, workdir: Path, limit: int | None) -> tuple[
        Any, Samples, Path]:
    """The quickstart's torch model, the photos, and its ONNX from edgebuild's export pass."""
    import torch

    from edgebuild.passes.export_onnx import ExportOnnx, ExportParams
    from edgebuild.passes.torch_model import build_torch_model

    torch.set_num_threads(threads)
    loaded = load_recipe(RECIPE)
    recipe = loaded.recipe.model_dump(mode="json",
                                      include={"model", "inputs", "outputs", "datasets"})
    if not Path(OPENCV_PHOTOS).is_dir():
        sys.exit(f"{OPENCV_PHOTOS} is missing: apt-get install opencv-doc "
                 "(scripts/setup.sh does); without it there are only 26 photos")
    recipe["datasets"]["peers-photos"] = {**PHOTOS, "limit": limit}
    ctx = context_from_recipe("peers", {}, workdir, recipe, loaded.base_dir)
    photos = ctx.dataset("peers-photos")
    ExportOnnx().run(ctx, ExportParams(opset=17))
    model = build_torch_model(recipe["model"], loaded.base_dir)
    return model, photos, workdir / "model.onnx"


def torch_eager(model: Any) -> Infer:
    import torch

    def infer(feeds: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            result: np.ndarray = model(*(torch.from_numpy(v) for v in feeds.values())).numpy()
        return result
    return infer


def ort_runner(path: Path, threads: int) -> Runner:
    """ONNX Runtime's defaults (graph level ALL, sequential), `threads` intra-op threads."""
    from edgebuild.backends.onnxruntime.options import GraphLevel, OrtOptions
    from edgebuild.backends.onnxruntime.runner import OrtRunner

    return OrtRunner(path, OrtOptions(graph_optimization_level=GraphLevel.ALL), threads)


def ort_static_int8(fp32: Path, out: Path, photos: Samples) -> Path:
    from onnxruntime.quantization import QuantFormat, quantize_static

    from edgebuild.quant.engines.ort import CalibrationReader

    destination = out / "ort-int8-qdq.onnx"
    quantize_static(fp32, destination, CalibrationReader(photos), quant_format=QuantFormat.QDQ,
                    per_channel=True)
    return destination


def openvino_ir(fp32: Path, out: Path, photos: Samples | None) -> Path:
    """The FP32 ONNX as OpenVINO IR (weights kept FP32), or NNCF INT8 with defaults."""
    import openvino as ov

    model = ov.convert_model(str(fp32))
    name = "ov-fp32"
    if photos is not None:
        import nncf

        items = [photos.feed(i) for i in range(len(photos))]
        model = nncf.quantize(model, nncf.Dataset(items))
        name = "ov-nncf-int8"
    destination = out / name / "model.xml"
    ov.save_model(model, str(destination), compress_to_fp16=False)
    return destination


def openvino_runner(xml: Path, threads: int, precision: str | None) -> Runner:
    from edgebuild.backends.openvino.runner import OpenVinoRunner

    config: dict[str, Any] = {"INFERENCE_NUM_THREADS": threads}
    if precision:
        config["INFERENCE_PRECISION_HINT"] = precision
    return OpenVinoRunner(xml, "CPU", config)


# --- edgebuild's artifacts ---------------------------------------------------------------


def from_report(report_path: Path) -> Iterator[tuple[str, Path, Target, dict[str, Any]]]:
    """Each target's final artifact in a report, with the target as its recipe resolved it."""
    report = json.loads(report_path.read_text())
    recipe_file = Path(report["recipe_file"])
    if not recipe_file.is_absolute():
        recipe_file = REPO / recipe_file
    targets: dict[str, Target] = {}
    try:
        targets = load_recipe(recipe_file).targets
    except EdgebuildError as exc:  # moved or since edited: the profile's own options
        print(f"{report_path}: {recipe_file}: {exc.message}; using the targets' profiles",
              file=sys.stderr)
    for target in report["targets"]:
        if not target.get("artifact"):
            print(f"{report_path}: target {target['name']} has no artifact; skipped",
                  file=sys.stderr)
            continue
        info = targets.get(target["name"]) or profile_target(target["profile"])
        reason = load_backend(info.backend).unmeasurable_reason(info)
        if reason:
            print(f"{report_path}: target {target['name']}: {reason}; skipped", file=sys.stderr)
            continue
        # The compile stage's metadata: how a runner maps the recipe's tensors onto the
        # artifact's (TFLite records layout permutations and integer scales there).
        compiled = next((s.get("metadata", {}) for s in report["stages"]
                         if s["id"] == f"compile@{target['name']}"), {})
        yield (f"edgebuild {report['recipe']}/{target['name']}",
               report_path.parent / target["artifact"], info, compiled)


def profile_target(profile: str) -> Target:
    profiles = load_profiles(profile_dirs(RECIPE))
    if profile not in profiles:
        sys.exit(f"no target profile '{profile}' (known: {', '.join(sorted(profiles))})")
    return Target(name=profile, profile=profiles[profile].profile)


def from_argument(text: str) -> tuple[str, Path, Target, dict[str, Any]]:
    """`NAME=path[@profile]`; the profile defaults to host-cpu (.onnx) or intel-cpu (.xml)."""
    name, sep, rest = text.partition("=")
    if not sep:
        sys.exit(f"--artifact {text!r}: expected NAME=path/to/model.onnx[@profile]")
    path, _, profile = rest.partition("@")
    default = "intel-cpu" if path.endswith(".xml") else "host-cpu"
    return f"edgebuild {name}", Path(path), profile_target(profile or default), {}


def artifact_runner(path: Path, target: Target, threads: int,
                    metadata: dict[str, Any]) -> Runner:
    backend = load_backend(target.backend)
    reason = backend.unmeasurable_reason(target)
    if reason:
        sys.exit(f"{path}: {reason}")
    artifact = Artifact(key="peers", format="", path=path.parent, files={}, sizes={},
                        metadata={**metadata, "main": path.name})
    return backend.runner(artifact, target, threads)


def runner_infer(runner: Runner) -> Infer:
    def infer(feeds: dict[str, np.ndarray]) -> np.ndarray:
        return next(iter(runner.infer(feeds).values()))
    return infer


# --- measuring ---------------------------------------------------------------------------


def round_robin(candidates: list[Candidate], feeds: dict[str, np.ndarray], rounds: int,
                warmup: int) -> None:
    """`rounds` (at least 8) × BLOCK timed calls of each candidate, order rotated each
    round: the search's own interleaved timing (edgebuild.measuring.select)."""
    settings = MeasureSettings(warmup_iterations=warmup, min_iterations=rounds * BLOCK,
                               max_iterations=rounds * BLOCK, min_seconds=0)
    blocks = time_blocks([_bind(c.infer, feeds) for c in candidates], settings)
    for candidate, measured in zip(candidates, blocks, strict=True):
        candidate.blocks = measured


def _bind(infer: Infer, feeds: dict[str, np.ndarray]) -> Callable[[], np.ndarray]:
    return lambda: infer(feeds)


def agreement(candidates: list[Candidate], photos: Samples, scratch: Path) -> None:
    """Top-1 agreement and cosine with FP32 PyTorch (the first candidate), per candidate."""
    assert candidates[0].name == EAGER
    paths = []
    for i, candidate in enumerate(candidates):
        outputs = [{"logits": candidate.infer(photos.feed(j))} for j in range(len(photos))]
        paths.append(scratch / f"outputs-{i}.npz")
        save_outputs(paths[-1], outputs, photos)
    for candidate, path in zip(candidates, paths, strict=True):
        candidate.accuracy = accuracy_metrics(path, paths[0])


def results(candidates: list[Candidate]) -> list[dict[str, Any]]:
    by_name = {c.name: c for c in candidates}
    rows = []
    for c in candidates:
        row: dict[str, Any] = {"name": c.name, "kind": c.kind, "source": c.source,
                               "latency_ms": summarize(c.blocks.ravel()),
                               "rounds": len(c.blocks), "accuracy": c.accuracy}
        for key, base in (("vs_eager", EAGER), ("vs_ort_fp32", ORT_FP32)):
            verdict = decide(by_name[base].blocks, c.blocks, threshold=0.0)
            row[key] = {"ratio": verdict.ratio, "ci95": [verdict.low, verdict.high]}
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], photos: int) -> str:
    lines = [f"| candidate | p50 ms | p90 ms | p50 / eager [95 % CI] | p50 / ORT fp32 "
             f"| top-1 agreement ({photos} photos) | cosine |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        latency, accuracy = row["latency_ms"], row["accuracy"]
        eager, ort = row["vs_eager"], row["vs_ort_fp32"]
        name = f"**{row['name']}**" if row["kind"] == "edgebuild" else row["name"]
        lines.append(
            f"| {name} | {latency['p50']:.2f} | {latency['p90']:.2f} "
            f"| {eager['ratio']:.3f} [{eager['ci95'][0]:.3f}–{eager['ci95'][1]:.3f}] "
            f"| {ort['ratio']:.2f} | {accuracy['top1_agreement']:.1f} % "
            f"| {accuracy['cosine']:.4f} |")
    return "\n".join(lines)


def cpu_flags() -> list[str]:
    wanted = {"avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile"}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return sorted(wanted & set(line.split(":", 1)[1].split()))
    return []


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("torch", "onnxruntime", "openvino", "nncf", "numpy"):
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


def openvino_cpu_defaults() -> dict[str, str]:
    """What "OpenVINO default" means on this CPU (bf16 only where the CPU has it)."""
    import openvino as ov

    core = ov.Core()
    out = {}
    for key in ("INFERENCE_PRECISION_HINT", "PERFORMANCE_HINT", "OPTIMIZATION_CAPABILITIES"):
        value = core.get_property("CPU", key)
        out[key] = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return out


# --- main --------------------------------------------------------------------------------


def build(args: argparse.Namespace, stack: contextlib.ExitStack, scratch: Path) -> tuple[
        list[Candidate], Samples]:
    chosen = [e for report in args.report for e in from_report(Path(report))]
    chosen += [from_argument(a) for a in args.artifact]
    for _, path, _, _ in chosen:  # before minutes of exporting and quantizing
        if not path.is_file():
            sys.exit(f"artifact {path} not found")
    limit = 24 if args.quick else None
    print("exporting EfficientNet-Lite0 and loading the photos …", file=sys.stderr)
    model, photos, onnx_fp32 = load_quickstart(args.threads, scratch, limit)

    def runner(r: Runner) -> Infer:
        return runner_infer(stack.enter_context(r))

    print(f"{len(photos)} photos; quantizing the INT8 peers …", file=sys.stderr)
    ort_int8 = ort_static_int8(onnx_fp32, scratch, photos)
    ov_fp32 = openvino_ir(onnx_fp32, scratch, None)
    ov_int8 = openvino_ir(onnx_fp32, scratch, photos)
    candidates = [
        Candidate(EAGER, "peer", torch_eager(model), "torch.no_grad(), set_num_threads"),
        Candidate(ORT_FP32, "peer", runner(ort_runner(onnx_fp32, args.threads)),
                  "torch.onnx.export opset 17; default SessionOptions"),
        Candidate("ONNX Runtime static INT8 QDQ (minmax, per-channel)", "peer",
                  runner(ort_runner(ort_int8, args.threads)),
                  "quantize_static(per_channel=True), defaults otherwise"),
        Candidate("OpenVINO default (no precision hint)", "peer",
                  runner(openvino_runner(ov_fp32, args.threads, None)),
                  "convert_model + compile_model, INFERENCE_NUM_THREADS only"),
        Candidate("OpenVINO f32", "peer",
                  runner(openvino_runner(ov_fp32, args.threads, "f32")),
                  "INFERENCE_PRECISION_HINT=f32"),
        Candidate("OpenVINO INT8, NNCF defaults", "peer",
                  runner(openvino_runner(ov_int8, args.threads, None)),
                  "nncf.quantize(model, dataset) with defaults"),
    ]
    for name, path, target, metadata in chosen:
        candidates.append(Candidate(name, "edgebuild",
                                    runner(artifact_runner(path, target, args.threads,
                                                           metadata)),
                                    f"{path} ({target.backend}, target {target.name})"))
    return candidates, photos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="append", default=[], metavar="REPORT_JSON",
                        help="an edgebuild report.json: add each target's final artifact")
    parser.add_argument("--artifact", action="append", default=[],
                        metavar="NAME=PATH[@PROFILE]", help="an artifact (.onnx or .xml)")
    parser.add_argument("--rounds", type=int, default=120,
                        help=f"round-robin rounds ({BLOCK} timed calls each per candidate)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed calls per candidate")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 24 photos, 8 rounds, 5 warm-up calls")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.warmup = min(args.rounds, 8), min(args.warmup, 5)
    os.environ.setdefault("CI", "true")  # OpenVINO/NNCF telemetry off (../shared/DATA.md)
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        candidates, photos = build(args, stack, Path(tmp))
        print(f"agreement on {len(photos)} photos …", file=sys.stderr)
        agreement(candidates, photos, Path(tmp))
        print(f"timing {len(candidates)} candidates, {args.rounds} rounds …", file=sys.stderr)
        before = conditions(args.threads)
        meter = CpuMeter.start()
        round_robin(candidates, photos.feed(0), args.rounds, args.warmup)
        others = meter.others_share() if meter is not None else None
        after = conditions(args.threads)
    rows = results(candidates)
    table = markdown(rows, len(photos))
    print(table)
    if others is not None and others > 0.1:
        print(f"warning: other processes used {others:.0%} of the CPU while this timed; "
              "thread-pool runtimes (PyTorch above all) slow down unevenly under "
              "contention, so re-run on a quieter machine", file=sys.stderr)
    if args.json:
        command = "python benchmarks/peers.py " + shlex.join(sys.argv[1:])
        args.json.write_text(json.dumps({
            "command": command, "photos": len(photos), "rounds": args.rounds,
            "block": BLOCK, "threads": args.threads, "seconds": round(time.time() - started, 1),
            "conditions": {**before, "load_average_after": after["load_average"],
                           "other_processes_cpu_share": others,
                           "cpu_flags": cpu_flags(), "versions": versions(),
                           "openvino_cpu_defaults": openvino_cpu_defaults()},
            "candidates": rows, "markdown": table}, indent=1))


if __name__ == "__main__":
    main()
