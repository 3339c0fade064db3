"""On-device latency: TFLite's `benchmark_model` on an Android phone, driven over adb
(the phone itself is found by edgebuild/devices/adb.py, shared with other backends).

    adb.connect(serial) -> benchmark_model on it?
        -> adb push model.tflite -> adb shell benchmark_model --graph=... --use_nnapi=true
        -> read its log (benchmark_log.py): run statistics (us), delegate messages,
           memory -> ms figures

Nothing here pretends: when adb, a phone or the binary is missing, `unavailable_reason`
says so in a sentence that starts with "not measurable here:" and the latency gate
reports that instead of a number.
"""

from __future__ import annotations

import contextlib
import hashlib
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.backends.tflite.benchmark_log import (
    DeviceDelegate,
    delegate_refusal,
    parse_benchmark_output,
    to_result,
)
from edgebuild.devices.adb import (
    DEVICE_DIR,
    AdbDevice,
    Phone,
    ask,
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
        probe = ask(phone.adb_argv("shell", f"[ -x {DEVICE_BINARY} ] && echo present "
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
