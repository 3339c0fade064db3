"""ExecuTorch's ETDump events as an op profile (backends/executorch/profile.py): the
warm-up runs dropped, XNNPACK's kernel names typed without layout and precision."""

from __future__ import annotations

import pytest

from edgebuild.backends.executorch.profile import _profile


def test_rows_are_the_timed_runs_of_each_operator_typed_by_kernel() -> None:
    # 2 warm-up runs then 3 timed ones, as the runtime records them (ms, in run order).
    events = [
        ("Method::execute", [9.0, 9.0, 3.0, 3.0, 3.0]),
        ("DELEGATE_CALL", [8.9, 8.9, 2.9, 2.9, 2.9]),
        ("Convolution (NHWC, QC8) DWConv #3", [5.0, 5.0, 1.0, 2.0, 3.0]),
        ("Fully Connected (NC, F32) GEMM #2", [4.0, 4.0, 0.5, 0.5, 0.5]),
        ("Constant Pad (ND, X32) #1", [1.0, 1.0, 0.25, 0.25, 0.25]),
    ]
    profile = _profile(events, runs=3, wall_ms=3.2, threads=2)
    assert profile.runtime_ms == 3.0 and profile.runs == 3 and profile.threads == 2
    assert [row.node for row in profile.rows] == [
        "Convolution (NHWC, QC8) DWConv #3", "Fully Connected (NC, F32) GEMM #2",
        "Constant Pad (ND, X32) #1"]
    conv = profile.rows[0]
    assert conv.ms == 2.0 and conv.op_type == "Convolution DWConv"
    assert conv.exec == "Convolution (NHWC, QC8) DWConv"
    assert profile.ops_ms == 2.75
    assert sum(row.share for row in profile.rows) == pytest.approx(1.0, abs=1e-3)
    assert profile.by_type()["Fully Connected GEMM"] == 0.5


def test_an_event_without_timed_runs_is_no_row() -> None:
    profile = _profile([("Method::execute", [2.0]), ("Add (ND) #1", [])], runs=1,
                       wall_ms=2.1, threads=None)
    assert profile.rows == [] and profile.ops_ms == 0 and profile.runtime_ms == 2.0
