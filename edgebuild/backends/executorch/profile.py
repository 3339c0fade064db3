"""ExecuTorch's per-operator profile on this host, as an OpProfile (measure/record.py).

The .pte is loaded again with ETDump on (`_load_for_executorch(..., enable_etdump=True)`,
the runtime's own event tracer), run WARMUP + `runs` times, and the dump is read offline
with ExecuTorch's `devtools.Inspector` (the ETDump file alone: no ETRecord is written at
compile time). Its "Execute" block holds, per run::

    Method::execute ─ DELEGATE_CALL ─┬─ `Fully Connected (NC, QS8, QC8W) GEMM #30`: an
                                     │    operator of XNNPACK's own runtime (its kernel,
                                     │    the precision it ran in, its index)
                                     └─ …
                      an operator left on the portable kernels: its own event

Rows are those operators, typed by the kernel without its layout/precision part
(`Fully Connected GEMM`, so an fp32 and an int8 build compare by op type), with the
whole kernel name as `exec`. What is not mapped, and why (in the note): XNNPACK reports
its operators, not the PyTorch nodes it replaced (it fuses and splits them), and without
an ETRecord no row names a node of the model.
"""

from __future__ import annotations

import re
import tempfile
import time
import warnings
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

from edgebuild.measure.record import OpProfile, OpRow

if TYPE_CHECKING:
    import numpy as np

WARMUP = 3
SOURCE = "executorch etdump (devtools Inspector)"
NOTE = ("XNNPACK rows are XNNPACK's own operators (kernel, precision, #index in the "
        "delegate), not the PyTorch nodes it replaced; no ETRecord is written, so no row "
        "names a node of the model")
RUN_EVENTS = ("Method::execute", "DELEGATE_CALL")  # a whole run, not one operator
_INDEX = re.compile(r"\s*#\d+$")  # "#30": the operator's index in its delegate
_LAYOUT = re.compile(r"\s*\([^)]*\)")  # "(NC, QS8, QC8W)": layout and precisions


def op_profile(program: Path, io: dict[str, Any], threads: int | None,
               feeds: dict[str, np.ndarray], runs: int) -> OpProfile:
    """`runs` profiled inferences of `feeds` after WARMUP, in this process (the latency
    stage's timed runs are over), on `threads` of XNNPACK's pool."""
    import numpy as np
    import torch

    from edgebuild.backends.executorch.lower import needs_executorch
    from edgebuild.backends.executorch.runner import runtime_module

    shapes = {t["name"]: list(feeds[t["name"]].shape) for t in io["inputs"]}
    built = {t["name"]: list(t["shape"]) for t in io["inputs"]}
    if shapes != built:
        return OpProfile(source=SOURCE, unmeasurable=(
            f"not measured: a .pte runs at the shapes it was exported at {built}, "
            f"not {shapes}"))
    with needs_executorch():
        runtime_module()  # the bindings, without the compiler
        from executorch.extension.pybindings import portable_lib

        if threads:
            portable_lib._unsafe_reset_threadpool(threads)
        module = portable_lib._load_for_executorch(str(program), enable_etdump=True)
        inputs = [torch.from_numpy(np.ascontiguousarray(feeds[t["name"]]))
                  for t in io["inputs"]]
        for _ in range(WARMUP):
            module.forward(inputs)
        walls = []
        for _ in range(runs):
            started = time.perf_counter()
            module.forward(inputs)
            walls.append((time.perf_counter() - started) * 1e3)
        with tempfile.TemporaryDirectory(prefix="edgebuild-etdump-") as scratch:
            dump = Path(scratch) / "etdump.etdp"
            module.write_etdump_result_to_file(str(dump))
            events = _events(dump)
    return _profile(events, runs, fmean(walls), threads)


def _events(dump: Path) -> list[tuple[str, list[float]]]:
    """(name, per-run ms in run order) of each event of the dump's Execute block."""
    with warnings.catch_warnings():  # "Output Buffer not found": no tensors were asked for
        warnings.simplefilter("ignore")
        from executorch.devtools import Inspector

        inspector = Inspector(etdump_path=str(dump))
    return [(event.name, [float(v) for v in event.perf_data.raw])
            for block in inspector.event_blocks if block.name == "Execute"
            for event in block.events if event.perf_data is not None]


def _profile(events: list[tuple[str, list[float]]], runs: int, wall_ms: float,
             threads: int | None) -> OpProfile:
    """The rows from the last `runs` runs of each event (the warm-up's are dropped)."""
    runtime_ms, found = None, []
    for name, raw in events:
        timed = raw[-runs:]
        if not timed:
            continue
        if name == RUN_EVENTS[0]:
            runtime_ms = fmean(timed)
        elif name not in RUN_EVENTS:
            kernel = _INDEX.sub("", name)
            found.append((name, _LAYOUT.sub("", kernel), kernel, fmean(timed)))
    total = sum(ms for *_, ms in found)
    rows = [OpRow(node=name, op_type=op_type, exec=kernel, ms=round(ms, 4),
                  share=round(ms / total, 4) if total else 0.0)
            for name, op_type, kernel, ms in sorted(found, key=lambda row: -row[3])]
    return OpProfile(source=SOURCE, runs=runs, wall_ms=round(wall_ms, 4),
                     runtime_ms=round(runtime_ms, 4) if runtime_ms is not None else None,
                     ops_ms=round(total, 4), threads=threads, rows=rows, note=NOTE)
