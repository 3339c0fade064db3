"""QNN's own per-op profile of the compiled context model, on the x86 HTP emulator.

onnxruntime-qnn's provider options `profiling_level` ("basic" | "detailed") and
`profiling_file_path` make the QNN EP append QNN's profile events to a CSV
(onnxruntime-qnn `qnn_profile_serializer.cc`, header `Msg Timestamp,Message,Time,Unit of
Measurement,Timing Source,Event Level,Event Identifier`). At "detailed", each execute
writes, in order::

    BACKEND  Accelerator (execute) time (cycles)   the HTP's cycles for the graph
      NODE   <qnn op>:OpId_<n> (cycles)            one per QNN op; they sum to the above
    BACKEND  Accelerator (execute) time     (US)   the emulator's wall time for the graph
    EXECUTE  QNN (execute) time             (US)   the same, with the EP's call around it

Rows: each QNN op, its cycles (the HTP model's count, the same on every run) and `ms`,
the emulator's accelerator time shared out by cycles. That time is the x86 emulator's,
never the phone's: the source and the note say so, and the latency gate stays "not
measurable here". The cycles are the more telling figure (what the HTP model counts),
but a phone's time is cycles at its clock plus what the emulator does not model.

Names: the QNN EP names a QNN op after the ONNX node it came from (the node of a QDQ
group), `<node>_token_<n>` for a further op it made for that node; an op it added for
the HTP's NHWC layout (`Transpose`, `Transpose_token_8`) or the graph's `Input`/`Output`
has no ONNX node. The HTP reports a fused group's cycles at one op of it: the others
show 0 cycles. Op types come from `qnn_nodes.json`, written by the compile stage (the
model the HTP was given); a name from the model file stays a plain string.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild.measure.record import OpProfile, OpRow

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.qnn.options import QnnOptions

WARMUP = 2
MAX_VALUE = 1e15  # a cycle count or microseconds above this is not a profile
NODES_FILE = "qnn_nodes.json"  # ONNX node name -> op type, of the model the HTP was given
SOURCE = "QNN HTP emulator (x86), profiling_level detailed — not phone time"
NOTE = ("the x86 HTP emulator's profile, not the phone's: ms is the emulator's accelerator "
        "time shared out by each op's HTP cycles; a phone runs the same cycles at its own "
        "clock. An op at 0 cycles ran fused into another (the HTP reports a fused group at "
        "one op); Transpose/Input/Output rows are ops the QNN EP added (NHWC layout, graph "
        "I/O), not ONNX nodes")
_OP = re.compile(r"^(?P<name>.*?)[: ]OpId_(?P<id>\d+) \(cycles\)$")
_TOKEN = re.compile(r"^(?P<stem>.*)_token_\d+$")
_ADDED = ("Input", "Output", "Transpose")  # ops of the EP's own, by name (not ONNX nodes)


@dataclass
class QnnRun:
    """One execute's events, as the CSV has them."""

    ops: list[tuple[str, int]] = field(default_factory=list)  # (QNN op, cycles), in order
    cycles: int | None = None  # Accelerator (execute) time (cycles)
    accelerator_us: float | None = None  # Accelerator (execute) time
    execute_us: float | None = None  # QNN (execute) time


class QnnProfileError(ValueError):
    """A QNN profile CSV row that is not QNN's (a number that is not a finite count)."""


def read_csv(text: str, where: str = "qnn_profile.csv") -> list[QnnRun]:
    """The executes of a QNN EP profile CSV, in order (the finalize's events set aside).
    The identifier is the last field and may hold commas (an op named by the model).
    A time or cycle count that is not a finite number >= 0 is refused, naming the row."""
    runs: list[QnnRun] = []
    current = QnnRun()
    for row, line in enumerate(text.splitlines()[1:], start=2):
        parts = line.split(",", 6)
        if len(parts) < 7:
            continue
        _, message, value, unit, _, _, ident = parts
        try:
            number = float(value)
        except ValueError:
            continue
        if not math.isfinite(number) or not 0 <= number <= MAX_VALUE:
            raise QnnProfileError(f"{where}, row {row}: {value.strip()[:40]!r} is not a "
                                  f"time or cycle count (a finite number from 0 to "
                                  f"{MAX_VALUE:g})")
        if message == "NODE" and unit == "CYCLES":
            match = _OP.match(ident)
            current.ops.append((match["name"] if match else ident, int(number)))
        elif message == "BACKEND" and ident == "Accelerator (execute) time (cycles)":
            current.cycles = int(number)
        elif message == "BACKEND" and ident == "Accelerator (execute) time" and unit == "US":
            current.accelerator_us = number
        elif message == "EXECUTE":
            current.execute_us = number if unit == "US" else None
            runs.append(current)
            current = QnnRun()
    return runs


def onnx_node(name: str, nodes: dict[str, str]) -> tuple[str | None, str]:
    """The ONNX node a QNN op came from (None: one the EP added) and the op type."""
    if name in nodes:
        return name, nodes[name]
    match = _TOKEN.match(name)
    if match and match["stem"] in nodes:
        return match["stem"], nodes[match["stem"]]
    stem = match["stem"] if match else name
    if stem in _ADDED:
        return None, stem
    return None, "?"


def from_runs(found: list[QnnRun], count: int, nodes: dict[str, str]) -> OpProfile:
    """The mean per run of each QNN op over the last `count` executes."""
    counted = [run for run in found if run.ops][-count:]
    if not counted:
        return OpProfile(source=SOURCE, runs=0, note=NOTE, unmeasurable=(
            "not measured: QNN's profile has no per-op events (profiling_level detailed "
            "writes them)"))
    cycles: dict[str, int] = {}
    ms: dict[str, float] = {}
    for run in counted:
        total = sum(c for _, c in run.ops)
        for name, c in run.ops:
            cycles[name] = cycles.get(name, 0) + c
            share = c / total if total else 0.0
            ms[name] = ms.get(name, 0.0) + share * (run.accelerator_us or 0.0) / 1000
    n = len(counted)
    ops_ms = sum(ms.values()) / n
    all_cycles = sum(cycles.values())
    rows = []
    for name in sorted(cycles, key=lambda k: -cycles[k]):
        node, op_type = onnx_node(name, nodes)
        rows.append(OpRow(node=name, op_type=op_type, exec="HTP (emulator)", ms=ms[name] / n,
                          share=cycles[name] / all_cycles if all_cycles else 0.0,
                          onnx_nodes=[node] if node is not None else None,
                          cycles=round(cycles[name] / n)))
    execute = [run.execute_us for run in counted if run.execute_us is not None]
    return OpProfile(source=SOURCE, runs=n, rows=rows, ops_ms=ops_ms, note=NOTE,
                     runtime_ms=sum(execute) / len(execute) / 1000 if execute else None,
                     cycles=_mean([run.cycles for run in counted]))


def _mean(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known)) if known else None


def op_profile(model: Path, options: QnnOptions, threads: int | None,
               feeds: dict[str, np.ndarray], runs: int) -> OpProfile:
    """`runs` profiled executes of the context model after WARMUP, in a session of its own
    (profiling on) on the HTP emulator."""
    from edgebuild.backends.onnxruntime.profile import timed_runs
    from edgebuild.backends.qnn.session import session

    nodes_file = model.parent / NODES_FILE
    nodes: dict[str, str] = {}
    if nodes_file.is_file():  # absent in a build from before it was written: types "?"
        loaded = json.loads(nodes_file.read_text())
        nodes = {str(k): str(v) for k, v in loaded.get("nodes", {}).items()}
    with tempfile.TemporaryDirectory(prefix="edgebuild-qnn-profile-") as scratch:
        csv = Path(scratch) / "qnn_profile.csv"  # the EP appends: a fresh file
        sess = session(model, {**options.provider_options(), "profiling_level": "detailed",
                               "profiling_file_path": str(csv)},
                       cpu_fallback=True, threads=threads)
        walls = timed_runs(sess, feeds, runs, WARMUP)
        del sess  # the EP writes the last events when the session goes
        text = csv.read_text(errors="replace") if csv.is_file() else ""
        try:
            found = read_csv(text, str(csv.name))
        except QnnProfileError as exc:  # the latency figure beside it stands
            return OpProfile(source=SOURCE, note=NOTE, unmeasurable=f"not measured: QNN's "
                             f"profile could not be read ({exc})")
    profile = from_runs(found, runs, nodes)
    profile.wall_ms = sum(walls) / len(walls) if walls else None
    profile.threads = threads
    return profile


def write_nodes(model: Path, out: Path) -> None:
    """`qnn_nodes.json` beside the context model: the node names and op types of the
    model the HTP was given (the profile's op types; the names are the model's)."""
    import onnx

    graph = onnx.load(str(model), load_external_data=False).graph
    nodes = {n.name: n.op_type for n in graph.node if n.name}
    out.write_text(json.dumps({"nodes": nodes}, indent=0, sort_keys=True))
