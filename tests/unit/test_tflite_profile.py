"""LiteRT's profiler events read as an OpProfile (backends/tflite/profile.py), in the
shape the C API recorded them for a detector's INT8 .tflite on XNNPACK (ai-edge-litert
2.3.0): per run a DEFAULT `Invoke`, XNNPACK's own operators (event type 8, indices from 0
in each delegate partition), builtin nodes between partitions (type 2, the node index),
and a telemetry `Invoke` (type 32) that is no operator."""

from __future__ import annotations

import pytest

from edgebuild.backends.tflite.litert_c import LiteRtEvent
from edgebuild.backends.tflite.profile import from_events, runs_of


def _e(tag: str, kind: int, index: int, us: int) -> LiteRtEvent:
    return LiteRtEvent(tag=tag, type=kind, index=index, us=us)


def _run(conv_us: int) -> list[LiteRtEvent]:
    return [_e("LiteRT::Run[buffer registration]", 1, 0, 150),
            _e("Invoke", 1, 0, 1000),
            _e("Convolution (NHWC, QC8) IGEMM", 8, 0, conv_us),
            _e("Add (ND)", 8, 1, 20),
            _e("TRANSPOSE", 2, 7, 300),  # a node XNNPACK did not take: builtin kernel
            _e("TfLiteXNNPackDelegate", 4, 9, 900),  # the delegate node around its ops
            _e("Convolution (NHWC, QC8) IGEMM", 8, 0, 100),  # the second partition
            _e("Invoke", 32, -1, 4294967296),  # telemetry, not an operator
            _e("LiteRT::Run[Buffer sync]", 1, 0, 30)]


def test_events_are_the_mean_per_run_by_partition_and_kernel() -> None:
    events = _run(400) + _run(600)
    assert [us for us, _ in runs_of(events)] == [1000, 1000]
    profile = from_events(events, {7: "model/tf.compat.v1.transpose/transpose"})
    assert profile.runs == 2 and profile.runtime_ms == pytest.approx(1.0)
    rows = {row.node: row for row in profile.rows}
    assert set(rows) == {"XNNPACK 0:0", "XNNPACK 0:1", "XNNPACK 1:0",
                         "model/tf.compat.v1.transpose/transpose"}
    first = rows["XNNPACK 0:0"]
    assert first.ms == pytest.approx(0.5)  # (400 + 600) µs over 2 runs
    assert first.op_type == "Convolution IGEMM"
    assert first.exec == "XNNPACK Convolution (NHWC, QC8) IGEMM"
    transpose = rows["model/tf.compat.v1.transpose/transpose"]
    assert (transpose.op_type, transpose.exec) == ("TRANSPOSE", "builtin kernel")
    # The delegate node's 900 µs is not counted on top of the operators it reported.
    assert profile.ops_ms == pytest.approx(0.5 + 0.02 + 0.3 + 0.1)
    assert profile.by_type()["Convolution IGEMM"] == pytest.approx(0.6)
    assert all(row.onnx_nodes is None for row in profile.rows) and profile.note


def test_a_profile_without_a_run_says_so() -> None:
    profile = from_events([_e("LiteRT::Run[Buffer sync]", 1, 0, 30)], {})
    assert profile.runs == 0 and profile.unmeasurable and not profile.rows
