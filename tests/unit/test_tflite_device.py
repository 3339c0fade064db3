"""On-device latency over adb: parsing real benchmark_model / adb output, reasons, commands.

No phone is attached to the machines these tests run on. The parsers are tested on
output recorded by other people on real phones (each sample names its source); the
command lines and device selection are tested against `FAKE_ADB`, a test double of the
adb CLI that records its arguments and replays recorded text. It measures nothing, and
no test here claims a measurement.
"""
# ruff: noqa: E501  -- recorded tool output is quoted verbatim, long lines included

from __future__ import annotations

import json
import stat
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from edgebuild.backends.tflite import benchmark_log, device
from edgebuild.backends.tflite.benchmark_log import (
    DeviceDelegate,
    parse_benchmark_output,
    to_result,
)
from edgebuild.backends.tflite.device import benchmark, benchmark_command, unavailable_reason
from edgebuild.devices.adb import find_adb
from edgebuild.errors import StageError
from tests.unit.test_adb import DEVICES_NONE, DEVICES_ONE, DEVICES_TWO

# --- Recorded benchmark_model output -----------------------------------------------------

# GPU delegate, android_arm_benchmark_model on a phone, plain lines.
# Source: https://github.com/tensorflow/tensorflow/issues/43541 (comment by yizhaoyanbo).
GPU_COMPLETE = """\
STARTING!
Log parameter values verbosely: [0]
Min num runs: [50]
Num threads: [4]
Min warmup runs: [1]
Graph: [/data/local/tmp/tflite/denoising_32bit.tflite]
Enable op profiling: [1]
#threads used for CPU inference: [4]
Use gpu: [1]
Loaded model /data/local/tmp/tflite/denoising_32bit.tflite
INFO: Initialized TensorFlow Lite runtime.
INFO: Created TensorFlow Lite delegate for GPU.
INFO: Initialized OpenCL-based API.
INFO: Created 1 GPU delegate kernels.
Explicitly applied GPU delegate, and the model graph will be completely executed by the delegate.
The input model file size (MB): 7.07479
Initialized session in 870.557ms.
Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
count=4 first=130565 curr=120829 min=117370 max=130565 avg=122373 std=4930

Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
count=50 first=119212 curr=118055 min=113737 max=124776 avg=119375 std=1948

Inference timings in us: Init: 870557, First inference: 130565, Warmup (avg): 122373, Inference (avg): 119375
"""

# NNAPI delegate partially applied, benchmark app logcat (TF 2.9).
# Source: https://github.com/tensorflow/tensorflow/issues/56301 (issue description).
NNAPI_PARTIAL_LOGCAT = """\
05-30 15:16:44.857  3380  3380 I tflite  : Explicitly applied NNAPI delegate, and the model graph will be partially executed by the delegate w/ 44 delegate kernels.
05-30 15:16:44.858  3380  3380 I tflite  : The input model file size (MB): 0.113392
05-30 15:16:44.858  3380  3380 I tflite  : Initialized session in 126.059ms.
05-30 15:16:44.858  3380  3380 I tflite  : Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
05-30 15:16:45.362  3380  3380 I tflite  : count=40 first=32942 curr=12594 min=11340 max=32942 avg=12581.9 std=3331
05-30 15:16:45.362  3380  3380 I tflite  : Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
05-30 15:16:46.365  3380  3380 I tflite  : count=75 first=12840 curr=11853 min=11787 max=13649 avg=12167.6 std=325
05-30 15:16:46.366  3380  3380 I tflite  : Inference timings in us: Init: 126059, First inference: 32942, Warmup (avg): 12581.9, Inference (avg): 12167.6
"""

# NNAPI requested but refused by the device: the run is a CPU run.
# Source: https://github.com/tensorflow/tensorflow/issues/56301 (comment by francescoyou97).
NNAPI_NOT_EXECUTED = """\
05-31 10:31:13.023 21767 21767 I tflite  : Use NNAPI: [1]
05-31 10:31:13.036 21767 21767 I tflite  : NNAPI accelerators available: [ipuadaptor,nnapi-reference]
05-31 10:31:13.036 21767 21767 I tflite  : Use xnnpack: [0]
05-31 10:31:13.037 21767 21767 I tflite  : Loaded model /data/local/tmp/model.tflite
05-31 10:31:13.037 21767 21767 I tflite  : Initialized TensorFlow Lite runtime.
05-31 10:31:13.041 21767 21767 I tflite  : Created TensorFlow Lite delegate for NNAPI.
05-31 10:31:13.042 21767 21767 I tflite  : NNAPI delegate created.
05-31 10:31:13.157 21767 21767 I tflite  : Though NNAPI delegate is explicitly applied, the model graph will not be executed by the delegate
"""

# No delegate, sub-millisecond model, fractional averages.
# Source: https://github.com/ARM-software/armnn/issues/541 (comment by n-moussa).
NO_DELEGATE = """\
STARTING!
Log parameter values verbosely: [0]
Graph: [ts_75.tflite]
Loaded model ts_75.tflite
Going to apply 0 delegates one after another.
The input model file size (MB): 0.184108
Initialized session in 1.304ms.
Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
count=7028 first=2071 curr=69 min=68 max=2071 avg=70.3736 std=24

Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
count=14192 first=93 curr=70 min=68 max=249 avg=69.691 std=5

Inference timings in us: Init: 1304, First inference: 2071, Warmup (avg): 70.3736, Inference (avg): 69.691
"""

# Memory footprint lines, then the per-op profiling summary.
# Source: https://github.com/google/XNNPACK/issues/999 (comment by AIWintermuteAI); the two
# profiling summary lines at the end are in the format of StatsCalculator::GetShortSummary
# as shown in tensorflow/tensorflow tensorflow/tools/benchmark/README.md.
WITH_MEMORY_AND_PROFILE = """\
Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
count=9 first=64791 curr=56295 min=54873 max=65831 avg=57758.2 std=4065

Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
count=50 first=58154 curr=53809 min=53077 max=60727 avg=55043.2 std=1562

Inference timings in us: Init: 18777, First inference: 64791, Warmup (avg): 57758.2, Inference (avg): 55043.2
Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the actual memory footprint of the model at runtime. Take the information at your discretion.
Memory footprint delta from the start of the tool (MB): init=8.97656 overall=18.7227
Profiling Info for Benchmark Initialization:
Timings (microseconds): count=50 first=330849 curr=274803 min=232354 max=415352 avg=275563 std=44193
Memory (bytes): count=50 curr=128366400(all same)
"""

# Older memory wording. Source: https://github.com/tensorflow/tensorflow/issues/42507.
OLD_MEMORY = """\
Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
count=15 first=49060 curr=33682 min=32825 max=49060 avg=34825.1 std=3930

Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
count=50 first=32891 curr=33978 min=32641 max=34005 avg=33209.4 std=450

Inference timings in us: Init: 855, First inference: 49060, Warmup (avg): 34825.1, Inference (avg): 33209.4
Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the actual memory footprint of the model at runtime. Take the information at your discretion.
Peak memory footprint (MB): init=0 overall=12.8672
"""

# A 2019-era build: different summary line, no "but terminate" clause.
# Source: https://github.com/yuenshome/yuenshome.github.io/issues/77 (comment by ysh329).
OLD_SUMMARY = """\
Use nnapi : [0]
nnapi error: unable to open library libneuralnetworks.so
Loaded model /data/local/tmp/tflite/tfmodel/mobilenet_v2_1.0_224_quant.tflite
resolved reporter
Initialized session in 12.516ms
Running benchmark for at least 4 iterations and at least 0.5 seconds
count=4 first=184820 curr=133931 min=133681 max=184820 avg=146548 std=22096

Running benchmark for at least 10 iterations and at least 1 seconds
count=10 first=133816 curr=133763 min=133474 max=134269 avg=133690 std=230

Average inference timings in us: Warmup: 146548, Init: 12516, no stats: 133690
"""

# NNAPI fully delegated on an NPU, "INFO:"/"VERBOSE:" prefixes, a single warm-up run
# ("count=1 curr=..."), the replacement line with "out of" and "for the whole graph".
# Source: Synaptics Astra SyNAP documentation, "Benchmarking models with NNAPI"
# (docs/synap/nnapi), as stored in the public reference index.
NNAPI_NPU = """\
INFO: STARTING!
INFO: Tensorflow Version : 2.15.0
INFO: Log parameter values verbosely: [0]
INFO: Graph: [/data/local/tmp/mobilenet_v1_0.25_224_quant.tflite]
INFO: Use NNAPI: [1]
INFO: NNAPI accelerator name: [synap-npu]
INFO: NNAPI accelerators available: [synap-npu,nnapi-reference]
INFO: Loaded model /data/local/tmp/mobilenet_v1_0.25_224_quant.tflite
INFO: Initialized TensorFlow Lite runtime.
INFO: Created TensorFlow Lite delegate for NNAPI.
INFO: NNAPI delegate created.
WARNING: NNAPI SL driver did not implement SL_ANeuralNetworksDiagnostic_registerCallbacks!
VERBOSE: Replacing 31 out of 31 node(s) with delegate (TfLiteNnapiDelegate) node, yielding 1 partitions for the whole graph.
INFO: Explicitly applied NNAPI delegate, and the model graph will be completely executed by the delegate.
INFO: The input model file size (MB): 0.497264
INFO: Initialized session in 66.002ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=1 curr=637079

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=520 first=2531 curr=2793 min=1171 max=9925 avg=1885.74 std=870

INFO: Inference timings in us: Init: 66002, First inference: 637079, Warmup (avg): 637079, Inference (avg): 1885.74
INFO: Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the actual memory footprint of the model at runtime. Take the information at your discretion.
INFO: Memory footprint delta from the start of the tool (MB): init=7.40234 overall=7.83203
"""

# A recent build: p5/median/p95 after std (StatWithPercentiles::OutputToStream in
# xla/tsl/util/stats_calculator.h), 6-significant-digit averages, XNNPACK partitions.
# Source: a public YOLO26-large FP16 benchmark report (OPPO A3x, benchmark app logcat),
# as stored in the public reference index.
PERCENTILES_XNNPACK = """\
07-08 15:33:55.786 I/tflite  ( 5395): Created TensorFlow Lite XNNPACK delegate for CPU.
07-08 15:33:55.790 I/tflite  ( 5395): Replacing 1036 out of 1097 node(s) with delegate (TfLiteXNNPackDelegate) node, yielding 23 partitions for subgraph 0.
07-08 15:33:56.228 I/tflite  ( 5395): The input model file size (MB): 49.9313
07-08 15:33:56.228 I/tflite  ( 5395): Initialized session in 458.883ms.
07-08 15:33:56.256 I/tflite  ( 5395): Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
07-08 15:33:58.992 I/tflite  ( 5395): count=1 curr=2732148 p5=2732148 median=2732148 p95=2732148
07-08 15:33:58.993 I/tflite  ( 5395): Running benchmark for at least 10 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
07-08 15:34:26.201 I/tflite  ( 5395): count=10 first=2653894 curr=2709263 min=2640862 max=3025403 avg=2.71985e+06 std=105101 p5=2640862 median=2709263 p95=3025403
07-08 15:34:26.202 I/tflite  ( 5395): Inference timings in us: Init: 458883, First inference: 2732148, Warmup (avg): 2.73215e+06, Inference (avg): 2.71985e+06
07-08 15:34:26.202 I/tflite  ( 5395): Memory footprint delta from the start of the tool (MB): init=286.73 overall=337
"""

# --- Parsing ------------------------------------------------------------------------------


def test_gpu_run_statistics_timings_and_delegation() -> None:
    log = parse_benchmark_output(GPU_COMPLETE)
    assert log.warmup is not None and log.timed is not None
    assert (log.warmup.count, log.warmup.avg) == (4, 122373.0)
    timed = log.timed
    assert (timed.count, timed.first, timed.min, timed.max, timed.avg, timed.std) == (
        50, 119212.0, 113737.0, 124776.0, 119375.0, 1948.0)
    assert timed.median is None
    assert (log.init_us, log.first_inference_us, log.inference_avg_us) == (
        870557.0, 130565.0, 119375.0)
    assert log.model_size_mb == 7.07479
    result = to_result(log, DeviceDelegate.GPU, 50)
    assert result["mean"] == pytest.approx(119.375) and result["std"] == pytest.approx(1.948)
    assert result["n"] == 50 and result["min"] == pytest.approx(113.737)
    assert "p50" not in result and "no percentile" in result["percentiles"]
    assert "no p90/p99" in result["percentiles"]
    assert result["delegation"] == {"requested": "gpu", "execution": "complete"}


def test_nnapi_partial_in_logcat_format() -> None:
    log = parse_benchmark_output(NNAPI_PARTIAL_LOGCAT)
    assert log.timed is not None and log.timed.count == 75
    assert log.timed.avg == 12167.6
    result = to_result(log, DeviceDelegate.NNAPI, 50)
    assert result["delegation"] == {"requested": "nnapi", "execution": "partial",
                                    "delegate_kernels": 44}
    assert result["warmup_n"] == 40 and result["warmup_mean_ms"] == pytest.approx(12.5819)


def test_nnapi_that_took_no_node_is_flagged_as_a_cpu_run() -> None:
    log = parse_benchmark_output(NNAPI_NOT_EXECUTED)
    assert log.accelerators == ("ipuadaptor", "nnapi-reference")
    assert log.timed is None  # the recorded excerpt stops before the runs
    summary = benchmark_log.delegation(log, DeviceDelegate.NNAPI)
    assert summary["execution"] == "none"
    assert "these are CPU figures" in summary["warning"]
    assert summary["nnapi_accelerators"] == ["ipuadaptor", "nnapi-reference"]
    with pytest.raises(ValueError, match="no run statistics"):
        to_result(log, DeviceDelegate.NNAPI, 50)


def test_fully_delegated_nnapi_nodes_partitions_memory() -> None:
    log = parse_benchmark_output(NNAPI_NPU)
    assert log.warmup is not None and log.warmup.count == 1
    assert log.warmup.avg == log.warmup.curr == 637079.0  # "count=1 curr=X"
    result = to_result(log, DeviceDelegate.NNAPI, 50)
    assert result["n"] == 520 and result["mean"] == pytest.approx(1.88574)
    assert result["delegation"] == {
        "requested": "nnapi", "execution": "complete", "delegate": "TfLiteNnapiDelegate",
        "nodes_delegated": 31, "partitions": 1, "nodes_total": 31, "nodes_on_cpu": 0,
        "nnapi_accelerators": ["synap-npu", "nnapi-reference"]}
    assert result["memory"] == {"init_mb": 7.40234, "overall_mb": 7.83203}
    assert result["init_ms"] == pytest.approx(66.002)


def test_percentiles_when_the_build_prints_them() -> None:
    log = parse_benchmark_output(PERCENTILES_XNNPACK)
    assert log.timed is not None
    assert (log.timed.avg, log.timed.median, log.timed.p95) == (2719850.0, 2709263.0,
                                                                3025403.0)
    result = to_result(log, DeviceDelegate.XNNPACK, 10)
    assert result["p50"] == pytest.approx(2709.263) and result["p5"] == pytest.approx(2640.862)
    assert result["p95"] == pytest.approx(3025.403)
    assert "nearest rank" in result["percentiles"]
    delegation = result["delegation"]
    assert (delegation["nodes_delegated"], delegation["nodes_total"],
            delegation["nodes_on_cpu"], delegation["partitions"]) == (1036, 1097, 61, 23)
    assert result["memory"] == {"init_mb": 286.73, "overall_mb": 337.0}


def test_no_delegate_fractions_and_old_formats() -> None:
    log = parse_benchmark_output(NO_DELEGATE)
    assert log.timed is not None and log.timed.avg == 69.691 and log.timed.count == 14192
    assert log.replacements == () and log.applied == ()
    memory = parse_benchmark_output(WITH_MEMORY_AND_PROFILE)
    assert memory.timed is not None and memory.timed.count == 50  # not the profile summary
    assert memory.timed.avg == 55043.2
    assert dict(memory.memory_mb) == {"init": 8.97656, "overall": 18.7227}
    assert dict(parse_benchmark_output(OLD_MEMORY).memory_mb) == {"init": 0.0,
                                                                 "overall": 12.8672}
    old = parse_benchmark_output(OLD_SUMMARY)
    assert old.warmup is not None and old.timed is not None
    assert (old.warmup.count, old.timed.count, old.timed.avg) == (4, 10, 133690.0)
    assert (old.init_us, old.warmup_avg_us, old.inference_avg_us) == (12516.0, 146548.0,
                                                                      133690.0)


def test_fewer_runs_than_asked_is_noted() -> None:
    result = to_result(parse_benchmark_output(NNAPI_PARTIAL_LOGCAT), DeviceDelegate.NNAPI, 100)
    assert result["runs_note"] == "benchmark_model stopped after 75 of 100 runs (its " \
                                  "max_secs limit)"


def test_benchmark_command_and_delegate_flags() -> None:
    assert benchmark_command("/data/local/tmp/benchmark_model", "/data/local/tmp/m.tflite",
                             DeviceDelegate.NNAPI, 4, 10, 100) == [
        "/data/local/tmp/benchmark_model", "--graph=/data/local/tmp/m.tflite",
        "--num_threads=4", "--warmup_runs=10", "--num_runs=100", "--use_nnapi=true"]
    assert DeviceDelegate.GPU.flags() == ["--use_gpu=true"]
    assert DeviceDelegate.XNNPACK.flags() == ["--use_xnnpack=true"]
    assert DeviceDelegate.CPU.flags() == ["--use_xnnpack=false"]
    no_threads = benchmark_command("b", "g", DeviceDelegate.CPU, None, 1, 5,
                                   ["--nnapi_accelerator_name=x"])
    assert not any(a.startswith("--num_threads") for a in no_threads)
    assert no_threads[-1] == "--nnapi_accelerator_name=x"


# --- Without adb, and with a test double of the adb CLI -------------------------------------


def test_no_adb_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("ANDROID_HOME", raising=False)
    monkeypatch.delenv("ANDROID_SDK_ROOT", raising=False)
    assert find_adb() is None
    reason = unavailable_reason()
    assert reason.startswith("not measurable here: adb not found")
    assert "platform-tools" in reason
    with pytest.raises(StageError, match="adb not found"):
        benchmark(tmp_path / "model.tflite")


FAKE_ADB = '''#!{python}
"""TEST DOUBLE of the adb CLI for edgebuild's unit tests: records its arguments and
replays recorded text. It is not adb, runs nothing on any phone, measures nothing."""
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_ADB_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:2] == ["devices", "-l"]:
    sys.stdout.write(os.environ["FAKE_ADB_DEVICES"])
    sys.exit(0)
if args[:1] == ["-s"]:
    args = args[2:]
if args[:1] == ["push"]:
    print(args[1] + ": 1 file pushed, 0 skipped.")
    sys.exit(0)
if args[:1] == ["shell"]:
    if args[1].startswith("[ -x"):
        print(os.environ.get("FAKE_ADB_BINARY", "present"))
        sys.exit(0)
    if args[1].startswith(("rm ", "chmod ")):
        sys.exit(0)
    if "--enable_op_profiling=true" in args[1] and os.environ.get("FAKE_ADB_REPLAY_PROFILE"):
        with open(os.environ["FAKE_ADB_REPLAY_PROFILE"]) as replay:  # the profiled run
            sys.stderr.write(replay.read())
        sys.exit(0)
    if "--use_xnnpack=false" in args[1] and os.environ.get("FAKE_ADB_REPLAY_CPU"):
        with open(os.environ["FAKE_ADB_REPLAY_CPU"]) as replay:  # builtin kernels run
            sys.stderr.write(replay.read())
        sys.exit(0)
    with open(os.environ["FAKE_ADB_REPLAY"]) as replay:
        sys.stderr.write(replay.read())
    sys.exit(int(os.environ.get("FAKE_ADB_EXIT", "0")))
sys.exit(1)
'''


@dataclass
class FakeAdb:
    log: Path
    replay: Path
    monkeypatch: pytest.MonkeyPatch

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def devices(self, text: str) -> None:
        self.monkeypatch.setenv("FAKE_ADB_DEVICES", text)

    def replays(self, text: str, exit_code: int = 0) -> None:
        self.replay.write_text(text)
        self.monkeypatch.setenv("FAKE_ADB_EXIT", str(exit_code))


@pytest.fixture
def fake_adb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeAdb:
    """Put the adb test double first (and alone) on PATH."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    script = bin_dir / "adb"
    script.write_text(textwrap.dedent(FAKE_ADB.format(python=sys.executable)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", str(bin_dir))
    for var in ("ANDROID_HOME", "ANDROID_SDK_ROOT", "ANDROID_SERIAL", "FAKE_ADB_BINARY"):
        monkeypatch.delenv(var, raising=False)
    fake = FakeAdb(tmp_path / "adb-calls.jsonl", tmp_path / "replay.txt", monkeypatch)
    monkeypatch.setenv("FAKE_ADB_LOG", str(fake.log))
    monkeypatch.setenv("FAKE_ADB_REPLAY", str(fake.replay))
    fake.devices(DEVICES_ONE)
    fake.replays(NNAPI_NPU)
    return fake


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.tflite"
    path.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(64))
    return path


def test_reasons_through_the_adb_double(fake_adb: FakeAdb, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fake_adb.devices(DEVICES_NONE)
    assert unavailable_reason() == ("not measurable here: no Android device attached "
                                    "(`adb devices` lists none)")
    fake_adb.devices(DEVICES_TWO)
    assert "2 Android devices attached" in unavailable_reason()
    assert unavailable_reason("n311r05e") == ""
    assert ["-s", "n311r05e", "shell",
            "[ -x /data/local/tmp/benchmark_model ] && echo present || echo missing"
            ] in fake_adb.calls()
    monkeypatch.setenv("ANDROID_SERIAL", "UYT5T18414003349")  # adb's own variable
    assert unavailable_reason() == ""
    monkeypatch.setenv("FAKE_ADB_BINARY", "missing")
    reason = unavailable_reason("n311r05e")
    assert reason.startswith("not measurable here: no benchmark_model at "
                             "/data/local/tmp/benchmark_model on n311r05e (M2012K11AC)")
    assert "android_aarch64_benchmark_model" in reason and device.PREBUILT_URL in reason
    assert unavailable_reason("n311r05e", binary=tmp_path / "absent").startswith(
        "not measurable here: benchmark_model binary")


def test_benchmark_runs_the_expected_adb_commands(fake_adb: FakeAdb, model: Path) -> None:
    result = benchmark(model, delegate="nnapi", threads=4, warmup_runs=10, num_runs=100)
    remote = f"/data/local/tmp/edgebuild_{device._digest(model)[:16]}.tflite"
    command = (f"/data/local/tmp/benchmark_model --graph={remote} --num_threads=4 "
               "--warmup_runs=10 --num_runs=100 --use_nnapi=true")
    serial = "UYT5T18414003349"
    assert fake_adb.calls() == [
        ["devices", "-l"],
        ["-s", serial, "shell",
         "[ -x /data/local/tmp/benchmark_model ] && echo present || echo missing"],
        ["-s", serial, "push", str(model), remote],
        ["-s", serial, "shell", command],
        ["-s", serial, "shell", f"rm -f {remote}"],
    ]
    # The numbers are whatever the replayed recording says; the double measured nothing.
    assert result["command"] == command and result["delegate"] == "nnapi"
    assert result["device"] == {"serial": serial, "usb": "1114112X", "product": "ALP-AL00",
                                "model": "ALP_AL00", "device": "HWALP", "transport_id": "23"}
    assert result["n"] == 520 and result["unit"] == "ms" and "runs_note" not in result
    assert result["delegation"]["nodes_on_cpu"] == 0


def test_benchmark_pushes_a_host_binary_for_the_gpu(fake_adb: FakeAdb, model: Path,
                                                    tmp_path: Path) -> None:
    binary = tmp_path / "android_aarch64_benchmark_model"
    binary.write_bytes(b"\x7fELF")
    fake_adb.replays(GPU_COMPLETE)
    result = benchmark(model, delegate="gpu", threads=2, warmup_runs=1, num_runs=50,
                       binary=binary)
    calls = [c[2:] for c in fake_adb.calls()[1:]]
    assert calls[0] == ["push", str(binary), device.PUSHED_BINARY]
    assert calls[1] == ["shell", f"chmod 755 {device.PUSHED_BINARY}"]
    assert calls[3][1].startswith(f"{device.PUSHED_BINARY} --graph=")
    assert calls[3][1].endswith("--num_threads=2 --warmup_runs=1 --num_runs=50 --use_gpu=true")
    assert result["mean"] == pytest.approx(119.375) and "p50" not in result


def test_benchmark_failure_is_a_stage_error_with_the_log(fake_adb: FakeAdb, model: Path
                                                         ) -> None:
    fake_adb.replays(NNAPI_NOT_EXECUTED + "ERROR: Benchmarking failed.\n", exit_code=1)
    with pytest.raises(StageError, match="benchmark_model failed on UYT5T18414003349") as err:
        benchmark(model, delegate="nnapi")
    assert "Benchmarking failed" in str(err.value)
    assert fake_adb.calls()[-1][3].startswith("rm -f /data/local/tmp/edgebuild_")  # cleaned up
    with pytest.raises(StageError, match="unknown delegate 'npu'"):
        benchmark(model, delegate="npu")


XNNPACK_REFUSED = """\
INFO: Created TensorFlow Lite XNNPACK delegate for CPU.
ERROR: failed to create XNNPACK runtime
ERROR: Node number 4 (TfLiteXNNPackDelegate) failed to prepare.
Failed to apply XNNPACK delegate.
Benchmarking failed.
"""


def test_a_refused_delegate_falls_back_to_builtin_kernels_when_allowed(
        fake_adb: FakeAdb, model: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake_adb.replays(XNNPACK_REFUSED, exit_code=1)
    cpu_log = tmp_path / "cpu.txt"
    cpu_log.write_text(NNAPI_NPU)  # any complete run: the double times nothing
    monkeypatch.setenv("FAKE_ADB_REPLAY_CPU", str(cpu_log))
    with pytest.raises(StageError, match="Node number 4"):
        benchmark(model, delegate="xnnpack")
    result = benchmark(model, delegate="xnnpack", fallback=True)
    commands = [c[3] for c in fake_adb.calls() if "--graph=" in c[-1]]
    assert commands[-2].endswith("--use_xnnpack=true")
    assert commands[-1].endswith("--use_xnnpack=false")
    assert result["delegate"] == "cpu" and result["requested_delegate"] == "xnnpack"
    assert result["fallback"] == (
        "ran on builtin kernels instead: the xnnpack delegate refused the model (ERROR: "
        "Node number 4 (TfLiteXNNPackDelegate) failed to prepare.)")
    assert benchmark_log.delegate_refusal("Failed to apply NNAPI delegate.") == \
        "Failed to apply NNAPI delegate."


def test_no_phone_no_benchmark(fake_adb: FakeAdb, model: Path) -> None:
    fake_adb.devices(DEVICES_NONE)
    with pytest.raises(StageError, match="no Android device attached"):
        benchmark(model)
    assert fake_adb.calls() == [["devices", "-l"]]


def test_latency_gate_on_device_figures() -> None:
    """benchmark_model's figures reach the gate: a printed median gates p50; p90 cannot."""
    from edgebuild.gates.kinds.latency import _device_latency, _latency_from_stats
    from edgebuild.measure.record import LatencyRecord, read_record
    from edgebuild.recipe.models import LatencyGate, Policy

    with_median = read_record(LatencyRecord, to_result(
        parse_benchmark_output(PERCENTILES_XNNPACK), DeviceDelegate.XNNPACK, 50), "the phone")
    p50 = _latency_from_stats("android", LatencyGate(budget_ms=5000, percentile=50),
                              with_median, Policy(), where="device: phone")
    assert p50.status.value == "passed" and "device: phone" in p50.message

    without = read_record(LatencyRecord, to_result(
        parse_benchmark_output(OLD_SUMMARY), DeviceDelegate.NNAPI, 50), "the phone")
    p90 = _device_latency("android", LatencyGate(budget_ms=1000, percentile=90), without,
                          "", {}, Policy())
    assert p90.status.value == "unmeasurable" and "not p90" in p90.message
    assert p90.details["device"]["delegation"]["requested"] == "nnapi"


RECORDED_PROFILE = Path(__file__).parent.parent / "data" / "profiles" / \
    "benchmark_model_qemu_riscv64_mobilenet_v1.txt"  # a real log (its README says whose)


def test_op_profile_is_a_run_of_its_own_after_the_timed_runs(
        fake_adb: FakeAdb, model: Path, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    from edgebuild.measure.profiled import profiled_runs
    from edgebuild.measure.record import LatencyRecord, OpProfile, read_record

    monkeypatch.setenv("FAKE_ADB_REPLAY_PROFILE", str(RECORDED_PROFILE))
    result = benchmark(model, delegate="nnapi", threads=4, warmup_runs=10, num_runs=100,
                       op_profile=True)
    shells = [c[3] for c in fake_adb.calls() if c[2:3] == ["shell"]
              and "benchmark_model --graph" in c[3]]
    assert len(shells) == 2 and "--enable_op_profiling" not in shells[0]
    runs = profiled_runs(result["mean"])  # about a second of the timed mean, 5 to 50
    assert shells[1].endswith(f"--warmup_runs=1 --num_runs={runs} --use_nnapi=true "
                              "--enable_op_profiling=true")
    record = read_record(LatencyRecord, result, "the phone's benchmark_model")
    profile = record.profile
    assert isinstance(profile, OpProfile) and profile.unmeasurable is None
    assert len(profile.rows) == 31 and profile.threads == 4
    assert profile.wall_ms == pytest.approx(2950.34)  # the profiled log's own timed mean
    assert profile.ops_ms == pytest.approx(profile.runtime_ms, rel=5e-4)
    assert record.mean == pytest.approx(result["mean"])  # the timed run's, profiler off
    broken = tmp_path / "broken.txt"
    broken.write_text("Operator-wise Profiling Info for Regular Benchmark Runs:\n"
                      "============================== Run Order ==========\n"
                      "\t[node type]\t[avg ms]\t[Name]\n\tCONV_2D\tfast\tconv\n")
    monkeypatch.setenv("FAKE_ADB_REPLAY_PROFILE", str(broken))
    failed = benchmark(model, delegate="nnapi", op_profile=True)
    assert failed["profile"]["unmeasurable"].startswith(
        "not measured: the profiled benchmark_model run on")
    assert failed["n"] == result["n"]  # the latency stands
