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

import functools
import importlib.util
import os
from typing import Any

SHARE_CPU_ENV = "EDGEBUILD_SHARE_CPU"
# What a stage that times nothing is started with (execute/task.run_in_subprocess);
# an OpenMP wait policy the user set is kept.
SHARING_ENV = {SHARE_CPU_ENV: "1", "OMP_WAIT_POLICY": "PASSIVE"}
_SPINNING = "session.intra_op.allow_spinning"


def shares_cpu() -> bool:
    """True in a stage started with SHARING_ENV (its ONNX Runtime sessions do not spin)."""
    return os.environ.get(SHARE_CPU_ENV) == "1"


def yield_when_idle(options: Any) -> Any:
    """ONNX Runtime session options whose idle threads sleep in a stage that shares the
    CPU (unchanged elsewhere, and where the entry is already set); returns `options`."""
    if shares_cpu():
        try:
            options.get_session_config_entry(_SPINNING)
        except RuntimeError:  # not set yet (setting it twice logs a warning)
            options.add_session_config_entry(_SPINNING, "0")
    return options


def sessions_yield_when_idle() -> None:
    """In a stage that shares the CPU, every ONNX Runtime session the process opens —
    edgebuild's, and those libraries open with options of their own (onnxruntime's
    quantization calibrator, onnx2tf's checks) — gets `yield_when_idle` options.

    Called once by the stage worker (execute/worker.main); costs the onnxruntime import
    (~40 ms). Measured (AMD EPYC, AVX2 only, 2 cores, beside one busy loop): the text
    recognizer's INT8 fidelity-budget stage took 92 s with the calibrator's sessions
    spinning and 68 s without (56 s on a quiet machine); one intra-op thread instead of
    two gained nothing more (67 s).
    """
    if not shares_cpu() or importlib.util.find_spec("onnxruntime") is None:
        return
    import onnxruntime

    session = onnxruntime.InferenceSession
    if getattr(session, "_edgebuild_yields", False):
        return
    opened = session.__init__

    @functools.wraps(opened)
    def init(self: Any, path_or_bytes: Any, sess_options: Any = None, *args: Any,
             **kwargs: Any) -> None:
        options = onnxruntime.SessionOptions() if sess_options is None else sess_options
        opened(self, path_or_bytes, yield_when_idle(options), *args, **kwargs)

    session.__init__ = init
    session._edgebuild_yields = True
