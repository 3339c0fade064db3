"""ONNX Runtime's profiler as an OpProfile (measure/record.py).

A session of its own with `SessionOptions.enable_profiling` runs a warm-up and then
`runs` inferences; its JSON trace (Chrome trace format) has, per run, one `model_run`
event and one `<node>_kernel_time` event per node with `op_name` and `provider`::

    model_run ├── conv0_kernel_time (Conv, CPUExecutionProvider) ── relu0_kernel_time …

Only the events inside the last `runs` model_run windows are counted (the warm-up is in
the trace too). A node ONNX Runtime made at load (layout transforms: `r0_nchwc`, a
Conv+Relu that writes tensor `r0`) has no node of its name in the model: the runtime
names the tensor it produces, so the row is mapped to the graph nodes from one of the
row's op type up to the node that produces that tensor, and marked a fused group.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.measure.record import OpProfile, OpRow

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.onnxruntime.options import OrtOptions

WARMUP = 3  # runs before the profiled ones: the first run allocates and plans
_SUFFIXES = ("_nchwc",)  # ORT's names for nodes it makes from a tensor's name
_CHAIN = 4  # at most this many nodes are walked back from a produced tensor
_OUTPUT = "_output_0"  # PyTorch's exporter: the first output of node N is `N_output_0`


def op_profile(model: Path, options: OrtOptions, threads: int | None,
               feeds: dict[str, np.ndarray], runs: int) -> OpProfile:
    from edgebuild.backends.onnxruntime.runner import session_options
    from edgebuild.customops.ort import session

    so = session_options(options, threads)
    with tempfile.TemporaryDirectory(prefix="edgebuild-ort-profile-") as scratch:
        so.enable_profiling = True
        so.profile_file_prefix = str(Path(scratch) / "ort")
        sess = session(model, so, options.execution_providers)
        walls = timed_runs(sess, feeds, runs, WARMUP)
        trace = Path(sess.end_profiling())
        events = json.loads(trace.read_text())
    profile = from_trace(events, runs, graph_of(model))
    profile.wall_ms = sum(walls) / len(walls)
    profile.threads = threads
    return profile


def graph_of(model: Path) -> list[tuple[str, str, list[str], list[str]]]:
    """(name, op type, inputs, outputs) of every node of the model, in graph order. A
    node ONNX Runtime's optimizer fused an activation into (a com.microsoft FusedConv, an
    NCHWc Conv with `activation`) is typed `Conv+Relu`, so it reads as a fused group."""
    import onnx

    proto = onnx.load(str(model), load_external_data=False)
    found = []
    for n in proto.graph.node:
        activation = next((a.s.decode() for a in n.attribute if a.name == "activation"), "")
        kind = f"{n.op_type}+{activation}" if activation and n.domain else n.op_type
        found.append((n.name, kind, list(n.input), list(n.output)))
    return found


def from_trace(events: list[dict[str, Any]], runs: int,
               graph: list[tuple[str, str, list[str], list[str]]]) -> OpProfile:
    """The profile of the last `runs` model_run windows of a trace."""
    model_runs = sorted((e for e in events if e.get("cat") == "Session"
                         and e.get("name") == "model_run"), key=lambda e: float(e["ts"]))
    counted = model_runs[-runs:]
    if not counted:
        return OpProfile(source="onnxruntime profiler", runs=0,
                         unmeasurable="the profiler recorded no model_run")
    windows = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in counted]
    times: dict[str, float] = {}
    kinds: dict[str, tuple[str, str]] = {}
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        ts = float(event["ts"])
        if not any(low <= ts <= high for low, high in windows):
            continue
        node = name[: -len("_kernel_time")]
        args = event.get("args") or {}
        times[node] = times.get(node, 0.0) + float(event["dur"]) / 1000  # µs -> ms
        kinds[node] = (str(args.get("op_name", "?")), str(args.get("provider", "")))
    count = len(counted)
    total = sum(times.values()) / count
    rows = []
    for node, ms in sorted(times.items(), key=lambda item: -item[1]):
        op_type, provider = kinds[node]
        mapped, fused = _onnx_nodes(node, op_type, graph)
        rows.append(OpRow(node=node, op_type=op_type, exec=provider or None, ms=ms / count,
                          share=(ms / count) / total if total else 0.0,
                          onnx_nodes=mapped, fused=fused))
    return OpProfile(source="onnxruntime profiler", runs=count, rows=rows, ops_ms=total,
                     runtime_ms=sum(high - low for low, high in windows) / count / 1000)


def _onnx_nodes(node: str, op_type: str, graph: list[tuple[str, str, list[str], list[str]]]
                ) -> tuple[list[str] | None, bool]:
    """The nodes a runtime node runs, and whether it is a fused group: a node of the built
    artifact by its name (ORT saved its fusions in it: `Conv+Relu` is a fused group); a
    node ORT named after the tensor it writes (`<tensor>_nchwc`) by the node that wrote
    that tensor in the model ORT was given, when the tensor's name says it (PyTorch's
    exporter names a node's output `<node>_output_0`), else by the artifact's graph."""
    by_name = {name: kind for name, kind, _, _ in graph}
    stem = next((node[: -len(s)] for s in _SUFFIXES if node.endswith(s)), None)
    if node in by_name:
        fused = by_name[node] != op_type
        if stem is not None and stem.endswith(_OUTPUT):
            return [stem[: -len(_OUTPUT)]], fused  # a fused group ends at that node
        return [node], fused
    producer = {out: (name, kind, inputs) for name, kind, inputs, outs in graph for out in outs}
    if stem is None or stem not in producer:
        return None, False
    chain: list[str] = []
    tensor = stem
    for _ in range(_CHAIN):
        if tensor not in producer:
            break
        name, kind, inputs = producer[tensor]
        chain.insert(0, name)
        if kind.split("+")[0] == op_type or not inputs:
            break
        tensor = inputs[0]
    return chain, len(chain) > 1


def timed_runs(sess: Any, feeds: dict[str, np.ndarray], runs: int, warmup: int) -> list[float]:
    """The wall ms of `runs` executes of an onnxruntime session after `warmup` untimed
    ones, every output fetched (the profiled runs of ONNX Runtime and of QNN's EP)."""
    names = [o.name for o in sess.get_outputs()]
    for _ in range(warmup):
        sess.run(names, feeds)
    walls = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        sess.run(names, feeds)
        walls.append((time.perf_counter_ns() - start) / 1e6)
    return walls
