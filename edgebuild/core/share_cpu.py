"""Stages that time nothing share the CPU: their runtimes' idle threads sleep.

A stage that exports, converts, quantizes or computes accuracy runs beside other work
(another stage, another build, a test worker). OpenMP and ONNX Runtime thread pools
spin while they wait for work by default; on a machine with more runnable threads than
cores a spinning pool steals the cores its own siblings need. Seen: the Core ML fp16
proxy's inference of 26 photos took 11 s quiet, 24 s beside one busy loop and 384 s
beside three other builds; with idle threads sleeping, 14 s beside the busy loop
(docs/performance.md). Timing stages keep the runtimes' defaults: a latency figure is
measured as the runtime would run on the device.
"""

from __future__ import annotations

import os
from typing import Any

SHARE_CPU_ENV = "EDGEBUILD_SHARE_CPU"
# What a stage that times nothing is started with (execute/task.run_in_subprocess);
# an OpenMP wait policy the user set is kept.
SHARING_ENV = {SHARE_CPU_ENV: "1", "OMP_WAIT_POLICY": "PASSIVE"}


def shares_cpu() -> bool:
    """True in a stage started with SHARING_ENV (its ONNX Runtime sessions do not spin)."""
    return os.environ.get(SHARE_CPU_ENV) == "1"


def yield_when_idle(options: Any) -> Any:
    """ONNX Runtime session options whose idle threads sleep in a stage that shares the
    CPU (unchanged elsewhere); returns `options`."""
    if shares_cpu():
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options
