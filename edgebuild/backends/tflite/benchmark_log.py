"""Reading TFLite's `benchmark_model` log: run statistics, delegation, memory, refusals.

device.py runs benchmark_model on the phone and hands its output here; this module only
reads text, so it is tested on logs recorded on real phones (tests/unit/test_tflite_device.py).

    log text -> parse_benchmark_output -> BenchmarkLog (us, as printed)
             -> to_result(log, delegate, runs) -> ms figures + delegation (measure/record.py)

What benchmark_model reports (tflite/tools/benchmark/benchmark_model.cc and
xla/tsl/util/stats_calculator.h): for the warm-up and the timed runs one line
`count=N first=.. curr=.. min=.. max=.. avg=.. std=..` in microseconds — `std` is the
population standard deviation, and numbers print with 6 significant digits
(`avg=2.71985e+06`). Builds from about 2024 append `p5=.. median=.. p95=..`
(nearest rank, values[n * p / 100]); older builds print no percentile at all, and no
build prints p90/p99 or a confidence interval. The result says which it got.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# Kernel names in "Replacing N out of M node(s) with delegate (<name>) node".
KERNEL_NAMES = {"nnapi": ("TfLiteNnapiDelegate",),
                "gpu": ("TfLiteGpuDelegateV2", "TfLiteGpuDelegate"),
                "xnnpack": ("TfLiteXNNPackDelegate",), "cpu": ()}
PERCENTILES_NOTE = ("benchmark_model prints count, mean, population std, min and max of its "
                    "timed runs{extra}; it prints no p90/p99 and no confidence interval")



class DeviceDelegate(StrEnum):
    """Which TFLite delegate benchmark_model applies on the phone."""

    NNAPI = "nnapi"
    GPU = "gpu"
    XNNPACK = "xnnpack"
    CPU = "cpu"  # TFLite's builtin kernels, XNNPACK switched off

    def flags(self) -> list[str]:
        """benchmark_model flags (tflite/tools/delegates/README.md parameter names)."""
        return {DeviceDelegate.NNAPI: ["--use_nnapi=true"],
                DeviceDelegate.GPU: ["--use_gpu=true"],
                DeviceDelegate.XNNPACK: ["--use_xnnpack=true"],
                DeviceDelegate.CPU: ["--use_xnnpack=false"]}[self]


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
_STATS = re.compile(
    rf"count=(?P<count>\d+)(?: first=(?P<first>{_NUM}))? curr=(?P<curr>{_NUM})"
    rf"(?P<same>\(all same\))?"
    rf"(?: min=(?P<min>{_NUM}) max=(?P<max>{_NUM}) avg=(?P<avg>{_NUM}) std=(?P<std>{_NUM}))?"
    rf"(?: p5=(?P<p5>{_NUM}) median=(?P<median>{_NUM}) p95=(?P<p95>{_NUM}))?")
_RUNNING = re.compile(r"Running benchmark for at least (\d+) iterations")
_TIMINGS = re.compile(
    rf"Inference timings in us: Init: (?P<init>{_NUM}), First inference: (?P<first>{_NUM}), "
    rf"Warmup \(avg\): (?P<warmup>{_NUM}), Inference \(avg\): (?P<avg>{_NUM})")
_OLD_TIMINGS = re.compile(  # before TF 2.2: "Average inference timings in us: ..."
    rf"Average inference timings in us: Warmup: (?P<warmup>{_NUM}), Init: (?P<init>{_NUM}), "
    rf"(?:no stats|Inference): (?P<avg>{_NUM})")
_REPLACING = re.compile(
    r"Replacing (?P<n>\d+)(?: out of (?P<total>\d+))? node\(s\) with delegate "
    r"\((?P<name>[^)]*)\) node, yielding (?P<parts>\d+) partitions")
_APPLIED = re.compile(
    r"(?:Explicitly applied (?P<a>\S+) delegate, and the model graph will be "
    r"(?P<how>completely|partially) executed by the delegate(?: w/ (?P<k>\d+) delegate "
    r"kernels)?|Though (?P<b>\S+) delegate is explicitly applied, the model graph will not "
    r"be executed by the delegate)")
_MEMORY = re.compile(rf"(?:Memory footprint delta from the start of the tool|Peak memory "
                     rf"footprint) \(MB\): init=(?P<init>{_NUM}) overall=(?P<overall>{_NUM})")
_PEAK = re.compile(rf"Overall peak memory footprint \(MB\) via periodic monitoring: "
                   rf"(?P<peak>{_NUM})")
_ACCELERATORS = re.compile(r"NNAPI accelerators available: \[(?P<names>[^\]]*)\]")
_MODEL_SIZE = re.compile(rf"The input model file size \(MB\): (?P<mb>{_NUM})")
# A delegate that cannot take the model stops benchmark_model with one of these.
_REFUSED = re.compile(r"Failed to apply (?P<a>\S+) delegate|Node number (?P<node>\d+) "
                      r"\((?P<b>TfLite\w*Delegate\w*)\) failed to prepare")
_ERROR = re.compile(r"\b(?:ERROR|E tflite|Failed to|failed to|Aborted|Segmentation fault)")


@dataclass(frozen=True)
class RunStats:
    """One `count=... first=... curr=...` line, in microseconds as printed."""

    count: int
    curr: float
    first: float | None = None
    min: float | None = None
    max: float | None = None
    avg: float | None = None
    std: float | None = None
    p5: float | None = None
    median: float | None = None
    p95: float | None = None


@dataclass(frozen=True)
class Replacement:
    """`Replacing N [out of M] node(s) with delegate (<name>) node, yielding K partitions`."""

    delegate: str
    nodes: int
    total: int | None
    partitions: int


@dataclass(frozen=True)
class Applied:
    """benchmark_model's verdict on an explicitly applied delegate."""

    delegate: str  # as benchmark_model names it: NNAPI, GPU, XNNPACK, ...
    execution: str  # "complete", "partial" or "none"
    kernels: int | None = None


@dataclass(frozen=True)
class BenchmarkLog:
    """What one benchmark_model run printed."""

    warmup: RunStats | None = None
    timed: RunStats | None = None
    init_us: float | None = None
    first_inference_us: float | None = None
    warmup_avg_us: float | None = None
    inference_avg_us: float | None = None
    replacements: tuple[Replacement, ...] = ()
    applied: tuple[Applied, ...] = ()
    accelerators: tuple[str, ...] = ()
    memory_mb: Mapping[str, float] = field(default_factory=dict)
    model_size_mb: float | None = None
    errors: tuple[str, ...] = ()


def _stats(match: re.Match[str]) -> RunStats:
    def num(name: str) -> float | None:
        text = match.group(name)
        return float(text) if text is not None else None

    curr = float(match.group("curr"))
    if match.group("avg") is None:  # "count=1 curr=X" or "count=N curr=X(all same)"
        return RunStats(int(match.group("count")), curr, first=curr, min=curr, max=curr,
                        avg=curr, std=0.0, p5=num("p5"), median=num("median"), p95=num("p95"))
    return RunStats(int(match.group("count")), curr, num("first"), num("min"), num("max"),
                    num("avg"), num("std"), num("p5"), num("median"), num("p95"))


def parse_benchmark_output(text: str) -> BenchmarkLog:
    """Parse benchmark_model's log (plain, `INFO: `-prefixed or logcat-prefixed lines).

    The statistics line after the first "Running benchmark for at least N iterations"
    is the warm-up, after the second the timed runs; per-op profiling tables
    ("Timings (microseconds): count=...") are not run statistics and are ignored.
    """
    warmup = timed = None
    runs_seen = 0
    waiting = False
    values: dict[str, float] = {}
    replacements: list[Replacement] = []
    applied: list[Applied] = []
    accelerators: tuple[str, ...] = ()
    memory: dict[str, float] = {}
    model_size = None
    errors: list[str] = []
    loose_stats: list[RunStats] = []
    for line in text.splitlines():
        if _RUNNING.search(line):
            runs_seen += 1
            waiting = True
            continue
        stats = _STATS.search(line)
        if stats and "Timings (microseconds)" not in line and "Memory (bytes)" not in line:
            parsed = _stats(stats)
            if waiting:
                waiting = False
                if runs_seen == 1:
                    warmup = parsed
                else:
                    timed = parsed
            else:
                loose_stats.append(parsed)
            continue
        if m := _TIMINGS.search(line):
            values.update(init=float(m["init"]), first=float(m["first"]),
                          warmup=float(m["warmup"]), avg=float(m["avg"]))
        elif m := _OLD_TIMINGS.search(line):
            values.update(init=float(m["init"]), warmup=float(m["warmup"]),
                          avg=float(m["avg"]))
        elif m := _REPLACING.search(line):
            replacements.append(Replacement(m["name"], int(m["n"]),
                                            int(m["total"]) if m["total"] else None,
                                            int(m["parts"])))
        elif m := _APPLIED.search(line):
            if m["b"]:
                applied.append(Applied(m["b"], "none"))
            else:
                applied.append(Applied(m["a"], "complete" if m["how"] == "completely"
                                       else "partial", int(m["k"]) if m["k"] else None))
        elif m := _MEMORY.search(line):
            memory.update(init=float(m["init"]), overall=float(m["overall"]))
        elif m := _PEAK.search(line):
            memory["peak"] = float(m["peak"])
        elif m := _ACCELERATORS.search(line):
            accelerators = tuple(n.strip() for n in m["names"].split(",") if n.strip())
        elif m := _MODEL_SIZE.search(line):
            model_size = float(m["mb"])
        elif _ERROR.search(line):
            errors.append(line.strip())
    if timed is None and warmup is None and loose_stats:  # no "Running benchmark" lines
        warmup, timed = (loose_stats[0], loose_stats[-1]) if len(loose_stats) > 1 \
            else (None, loose_stats[0])
    return BenchmarkLog(warmup, timed, values.get("init"), values.get("first"),
                        values.get("warmup"), values.get("avg"), tuple(replacements),
                        tuple(applied), accelerators, memory, model_size, tuple(errors))


def delegation(log: BenchmarkLog, delegate: DeviceDelegate) -> dict[str, Any]:
    """Nodes the requested delegate took and how many stayed on the CPU."""
    names = KERNEL_NAMES[delegate.value]
    mine = [r for r in log.replacements if r.delegate in names]
    out: dict[str, Any] = {"requested": delegate.value}
    verdict = next((a for a in log.applied if a.delegate.lower() == delegate.value), None)
    if verdict is not None:
        out["execution"] = verdict.execution
        if verdict.kernels is not None:
            out["delegate_kernels"] = verdict.kernels
    if mine:
        nodes = sum(r.nodes for r in mine)
        out["delegate"] = mine[0].delegate
        out["nodes_delegated"] = nodes
        out["partitions"] = sum(r.partitions for r in mine)
        totals = [r.total for r in mine]
        if all(t is not None for t in totals):
            total = sum(t for t in totals if t is not None)
            out["nodes_total"] = total
            out["nodes_on_cpu"] = total - nodes
    others = [r for r in log.replacements if r.delegate not in names]
    if others:
        out["other_delegates"] = [{"delegate": r.delegate, "nodes": r.nodes,
                                   "of": r.total} for r in others]
    if delegate is not DeviceDelegate.CPU and verdict is not None and \
            verdict.execution == "none":
        out["warning"] = (f"benchmark_model says the {delegate.value} delegate took no node: "
                          "these are CPU figures")
    if log.accelerators:
        out["nnapi_accelerators"] = list(log.accelerators)
    return out


def to_result(log: BenchmarkLog, delegate: DeviceDelegate, requested_runs: int
              ) -> dict[str, Any]:
    """benchmark_model's figures in ms, named like edgebuild's latency summary."""
    timed = log.timed
    if timed is None:
        raise ValueError("benchmark_model printed no run statistics")

    def ms(us: float | None) -> float | None:
        return None if us is None else us / 1000.0

    result: dict[str, Any] = {
        "n": timed.count, "mean": ms(timed.avg), "std": ms(timed.std), "min": ms(timed.min),
        "max": ms(timed.max), "first": ms(timed.first),
    }
    if timed.median is not None:
        result.update(p5=ms(timed.p5), p50=ms(timed.median), p95=ms(timed.p95))
        extra = ", and p5/median/p95 by nearest rank (this build prints them)"
    else:
        extra = " (this build prints no percentile)"
    result["percentiles"] = PERCENTILES_NOTE.format(extra=extra)
    result.update(init_ms=ms(log.init_us), first_inference_ms=ms(log.first_inference_us),
                  warmup_mean_ms=ms(log.warmup_avg_us),
                  warmup_n=log.warmup.count if log.warmup else None)
    if timed.count < requested_runs:
        result["runs_note"] = (f"benchmark_model stopped after {timed.count} of "
                               f"{requested_runs} runs (its max_secs limit)")
    result["delegation"] = delegation(log, delegate)
    if log.memory_mb:  # {init, overall, peak} as measure/record.py's Memory
        result["memory"] = {f"{name}_mb": mb for name, mb in log.memory_mb.items()}
    if log.model_size_mb is not None:
        result["model_size_mb"] = log.model_size_mb
    if log.errors:
        result["log_errors"] = list(log.errors)
    return result


def delegate_refusal(output: str) -> str:
    """The line of a benchmark_model log where a delegate refused the model, or ''."""
    for line in output.splitlines():
        if _REFUSED.search(line):
            return " ".join(line.split())
    return ""
