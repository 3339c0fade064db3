"""On-device latency: TFLite's `benchmark_model` on an Android phone, driven over adb
(the phone itself is found by edgebuild/devices/adb.py, shared with other backends).

    adb.connect(serial) -> benchmark_model on it?
        -> adb push model.tflite -> adb shell benchmark_model --graph=... --use_nnapi=true
        -> parse its log: run statistics (us), delegate messages, memory -> ms figures

Nothing here pretends: when adb, a phone or the binary is missing, `unavailable_reason`
says so in a sentence that starts with "not measurable here:" and the latency gate
reports that instead of a number.

What benchmark_model reports (tflite/tools/benchmark/benchmark_model.cc and
xla/tsl/util/stats_calculator.h): for the warm-up and the timed runs one line
`count=N first=.. curr=.. min=.. max=.. avg=.. std=..` in microseconds — `std` is the
population standard deviation, and numbers print with 6 significant digits
(`avg=2.71985e+06`). Builds from about 2024 append `p5=.. median=.. p95=..`
(nearest rank, values[n * p / 100]); older builds print no percentile at all, and no
build prints p90/p99 or a confidence interval. The result says which it got.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from edgebuild.devices.adb import (
    DEVICE_DIR,
    AdbDevice,
    Phone,
    connect,
    run,
)
from edgebuild.errors import StageError

DEVICE_BINARY = f"{DEVICE_DIR}/benchmark_model"
PUSHED_BINARY = f"{DEVICE_DIR}/edgebuild_benchmark_model"
PREBUILT_URL = ("https://storage.googleapis.com/tensorflow-nightly-public/prod/tensorflow/"
                "release/lite/tools/nightly/latest/android_aarch64_benchmark_model")
DOCS_URL = "https://ai.google.dev/edge/litert/models/measurement"
GET_BINARY = (f"download the prebuilt nightly android_aarch64_benchmark_model ({PREBUILT_URL}, "
              f"from the LiteRT performance measurement docs, {DOCS_URL}), then "
              f"`adb push android_aarch64_benchmark_model {DEVICE_BINARY}` and "
              f"`adb shell chmod +x {DEVICE_BINARY}`, or set the target option "
              "`benchmark_model` to its host path")
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


@dataclass(frozen=True)
class _Phone:
    """A phone ready for benchmark_model: where it is, and the binary to run."""

    phone: Phone
    binary: str  # on the device
    push_binary: Path | None  # host binary to push first

    @property
    def device(self) -> AdbDevice:
        return self.phone.device

    def adb_argv(self, *args: str) -> list[str]:
        return self.phone.argv(*args)


def _resolve(serial: str | None, binary: str | Path | None,
             timeout: float = 30.0) -> _Phone | str:
    found = connect(serial, timeout)
    if isinstance(found, str):
        return found
    chosen = found.device
    if binary is not None:
        host = Path(binary).expanduser()
        if not host.is_file():
            return (f"not measurable here: benchmark_model binary {host} does not exist; "
                    f"{GET_BINARY}")
        return _Phone(found, PUSHED_BINARY, host)
    phone = _Phone(found, DEVICE_BINARY, None)
    try:
        probe = run(phone.adb_argv("shell", f"[ -x {DEVICE_BINARY} ] && echo present "
                                             "|| echo missing"), timeout,
                     "checking for benchmark_model on the phone")
    except StageError as err:
        return f"not measurable here: {err.message}"
    if "present" not in probe.stdout:
        return (f"not measurable here: no benchmark_model at {DEVICE_BINARY} on "
                f"{chosen.describe()}; {GET_BINARY}")
    return phone


def unavailable_reason(serial: str | None = None, binary: str | Path | None = None) -> str:
    """'' when a phone and benchmark_model are ready, else "not measurable here: ..."."""
    found = _resolve(serial, binary)
    return found if isinstance(found, str) else ""


# ---------------------------------------------------------------- benchmark_model's log

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


# ---------------------------------------------------------------- running it


def benchmark_command(binary: str, graph: str, delegate: DeviceDelegate, threads: int | None,
                      warmup_runs: int, num_runs: int, extra_flags: Sequence[str] = ()
                      ) -> list[str]:
    """The benchmark_model command line run on the phone."""
    argv = [binary, f"--graph={graph}"]
    if threads is not None and threads > 0:
        argv.append(f"--num_threads={threads}")
    argv += [f"--warmup_runs={warmup_runs}", f"--num_runs={num_runs}", *delegate.flags(),
             *extra_flags]
    return argv


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def delegate_refusal(output: str) -> str:
    """The line of a benchmark_model log where a delegate refused the model, or ''."""
    for line in output.splitlines():
        if _REFUSED.search(line):
            return " ".join(line.split())
    return ""


def benchmark(model: Path, delegate: str = "nnapi", threads: int | None = 4,
              warmup_runs: int = 1, num_runs: int = 50, serial: str | None = None,
              binary: str | Path | None = None, timeout_s: float = 900.0,
              extra_flags: Sequence[str] = (), fallback: bool = False,
              op_profile: bool = False) -> dict[str, Any]:
    """Run benchmark_model on the phone; ms statistics, delegation and memory.

    `binary`: a host path of an Android benchmark_model to push (else the phone's
    /data/local/tmp/benchmark_model). `extra_flags` go to benchmark_model as given, e.g.
    ["--nnapi_accelerator_name=google-edgetpu"]. `fallback`: when the delegate refuses
    the model, time the builtin kernels instead and say so in `fallback`. `op_profile`:
    after the timed runs, a run of its own with `--enable_op_profiling=true` (the
    profiler's bookkeeping stays out of the timed figures), read into `profile`
    (op_profiling.py). Raises StageError when it cannot run.
    """
    try:
        return _benchmark(model, delegate, threads, warmup_runs, num_runs, serial, binary,
                          timeout_s, extra_flags, op_profile)
    except StageError as err:
        refusal = delegate_refusal(err.message)
        if not (fallback and refusal and delegate != DeviceDelegate.CPU.value):
            raise
    result = _benchmark(model, DeviceDelegate.CPU.value, threads, warmup_runs, num_runs,
                        serial, binary, timeout_s, extra_flags, op_profile)
    return {**result, "requested_delegate": delegate,
            "fallback": f"ran on builtin kernels instead: the {delegate} delegate refused "
                        f"the model ({refusal})"}


def _benchmark(model: Path, delegate: str, threads: int | None, warmup_runs: int,
               num_runs: int, serial: str | None, binary: str | Path | None,
               timeout_s: float, extra_flags: Sequence[str],
               op_profile: bool = False) -> dict[str, Any]:
    try:
        chosen = DeviceDelegate(delegate)
    except ValueError as err:
        raise StageError(f"unknown delegate {delegate!r}",
                         f"use one of {', '.join(d.value for d in DeviceDelegate)}") from err
    phone = _resolve(serial, binary)
    if isinstance(phone, str):
        raise StageError(phone.removeprefix("not measurable here: "),
                         "on-device latency needs adb, one attached phone and benchmark_model")
    model = Path(model)
    remote_model = f"{DEVICE_DIR}/edgebuild_{_digest(model)[:16]}.tflite"
    command = benchmark_command(phone.binary, remote_model, chosen, threads, warmup_runs,
                                num_runs, extra_flags)
    where = phone.device.describe()
    try:
        if phone.push_binary is not None:
            _check(run(phone.adb_argv("push", str(phone.push_binary), phone.binary), 300,
                        "pushing benchmark_model"), "pushing benchmark_model", where)
            _check(run(phone.adb_argv("shell", f"chmod 755 {phone.binary}"), 60,
                        "chmod benchmark_model"), "making benchmark_model executable", where)
        _check(run(phone.adb_argv("push", str(model), remote_model), 300,
                    "pushing the model"), "pushing the model", where)
        done = run(phone.adb_argv("shell", shlex.join(command)), timeout_s,
                    f"benchmark_model on {where}")
        timed = parse_benchmark_output(done.stdout + "\n" + done.stderr).timed
        profile = _profiled(phone, remote_model, chosen, threads, extra_flags, timeout_s,
                            timed.avg / 1000 if timed and timed.avg else None) \
            if op_profile and done.returncode == 0 else None
    finally:
        with contextlib.suppress(StageError):  # a leftover file does no harm
            run(phone.adb_argv("shell", f"rm -f {remote_model}"), 60, "removing the model")
    output = done.stdout + ("\n" + done.stderr if done.stderr else "")
    log = parse_benchmark_output(output)
    if done.returncode != 0 or log.timed is None:
        raise StageError(
            f"benchmark_model failed on {where} (exit {done.returncode}):\n{_tail(output)}",
            "run the same command with `adb shell` to see the whole log; a delegate that "
            "cannot run the model makes benchmark_model stop")
    result = to_result(log, chosen, num_runs)
    if profile is not None:
        result["profile"] = profile
    return {"source": "TFLite benchmark_model on the phone over adb",
            "device": {"serial": phone.device.serial, **phone.device.details},
            "delegate": chosen.value, "command": shlex.join(command), "unit": "ms",
            **result}


def _profiled(phone: _Phone, remote_model: str, delegate: DeviceDelegate,
              threads: int | None, extra_flags: Sequence[str], timeout_s: float,
              mean_ms: float | None) -> dict[str, Any]:
    """A benchmark_model run with `--enable_op_profiling=true` (about a second of runs,
    as on the host: measuring/profiling.py), read as an OpProfile's JSON; one that says why
    not when the run or its tables fail (the latency before it stands)."""
    from edgebuild.backends.tflite.op_profiling import SOURCE, ProfileLogError, op_profile
    from edgebuild.measure.profiled import profiled_runs
    from edgebuild.measure.record import OpProfile

    runs = profiled_runs(mean_ms)
    command = benchmark_command(phone.binary, remote_model, delegate, threads, 1, runs,
                                [*extra_flags, "--enable_op_profiling=true"])
    where = phone.device.describe()
    try:
        done = run(phone.adb_argv("shell", shlex.join(command)), timeout_s,
                   f"benchmark_model --enable_op_profiling on {where}")
        output = done.stdout + ("\n" + done.stderr if done.stderr else "")
        if done.returncode != 0:
            raise StageError(f"exit {done.returncode}: {_tail(output, 2)}")
        found = op_profile(output)
    except (StageError, ProfileLogError) as err:
        text = err.message if isinstance(err, StageError) else str(err)
        return OpProfile(source=SOURCE, unmeasurable=(
            f"not measured: the profiled benchmark_model run on {where} failed: "
            f"{' '.join(text.split())[:300]}")).to_json()
    if found is None:
        return OpProfile(source=SOURCE, unmeasurable=(
            f"not measured: benchmark_model on {where} printed no per-operator tables "
            "(a build without the profiling listener?)")).to_json()
    log = parse_benchmark_output(output)
    found.threads = threads
    if log.timed is not None and log.timed.avg is not None:
        found.wall_ms = log.timed.avg / 1000  # the profiled runs' own mean, profiler on
    found.note = f"{found.note}; a run of its own after the timed runs: {shlex.join(command)}"
    return found.to_json()


def _check(done: subprocess.CompletedProcess[str], what: str, where: str) -> None:
    if done.returncode != 0:
        raise StageError(f"{what} to {where} failed: {_tail(done.stderr or done.stdout, 3)}",
                         f"is there space in {DEVICE_DIR} and is the phone still attached?")
