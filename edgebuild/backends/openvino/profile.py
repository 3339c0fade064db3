"""OpenVINO's performance counters as an OpProfile (measure/record.py).

The IR is compiled again with `PERF_COUNT: True` (`runner.profiled`). `profiling_info`
is, per layer of the compiled (runtime) graph, the mean per run over every run the
compiled model made from any request (seen in OpenVINO 2026.4: a second request's first
counters average in the first one's runs), with the kernel that ran it (`exec_type`:
`brgconv_avx2_f32`, `jit_avx2_I8`, …). The first runs allocate, so the counters are read
after WARMUP runs and after the profiled ones, and the profiled runs' own mean is
(mean after × all runs − mean after the warm-up × WARMUP) / runs.

Layers the plugin fused into another are NOT_RUN and left out; the runtime model's
`originalLayersNames` says which IR layers each executed one runs
(`conv0/WithoutBiases,relu0`). OpenVINO's ONNX frontend names a Conv's convolution
`<node>/WithoutBiases` (its bias Add keeps `<node>`), and some layers after their output
tensor, which PyTorch's exporter names `<node>_output_0`: both are cut back to the ONNX
node's name. A layer running more than one ONNX node is a fused group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgebuild.measure.record import OpProfile, OpRow

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.openvino.runner import OpenVinoRunner

WARMUP = 3


def op_profile(runner: OpenVinoRunner, feeds: dict[str, np.ndarray],
               shapes: dict[str, list[int]], runs: int) -> OpProfile:
    with runner:
        runner.reshape(shapes)
        walls, before, after, runtime = runner.profiled(feeds, runs, WARMUP)
    profile = from_counters(before, after, WARMUP, _originals(runtime), runs)
    profile.wall_ms = sum(walls) / len(walls)
    return profile


def _originals(runtime: Any) -> dict[str, list[str]]:
    """Runtime layer -> the IR layers it runs (rt_info `originalLayersNames`)."""
    found = {}
    for op in runtime.get_ordered_ops():
        info = op.get_rt_info()
        if "originalLayersNames" in info:
            names = str(info["originalLayersNames"].astype(str))
            found[op.get_friendly_name()] = [n for n in names.split(",") if n]
    return found


_PARTS = ("/WithoutBiases",)  # what the ONNX frontend appends to a node's name
_OUTPUT = "_output_0"


def onnx_name(layer: str) -> str:
    """The ONNX node an IR layer came from, by the frontend's and exporter's naming."""
    for part in _PARTS:
        layer = layer.removesuffix(part)
    return layer.removesuffix(_OUTPUT)


def from_counters(before: list[Any], after: list[Any], warmup: int,
                  originals: dict[str, list[str]], runs: int) -> OpProfile:
    """Rows from `profiling_info` entries (node_name, node_type, exec_type, status,
    real_time) read after `warmup` runs and after `warmup + runs`, slowest first."""
    earlier = {str(p.node_name): p.real_time.total_seconds() * 1000 for p in before}
    executed = []
    for p in after:
        if not str(p.status).endswith("EXECUTED") or str(p.status).endswith("NOT_RUN"):
            continue
        name = str(p.node_name)
        mean = p.real_time.total_seconds() * 1000
        ms = max(0.0, (mean * (warmup + runs) - earlier.get(name, 0.0) * warmup) / runs)
        executed.append((name, str(p.node_type), str(p.exec_type), ms))
    total = sum(ms for *_, ms in executed)
    rows = []
    for node, op_type, exec_type, ms in sorted(executed, key=lambda row: -row[3]):
        layers = originals.get(node)
        onnx = list(dict.fromkeys(onnx_name(name) for name in layers)) if layers else None
        rows.append(OpRow(node=node, op_type=op_type, exec=exec_type, ms=ms,
                          share=ms / total if total else 0.0, onnx_nodes=onnx,
                          fused=bool(onnx and len(onnx) > 1)))
    return OpProfile(source="openvino PERF_COUNT", runs=runs, rows=rows, ops_ms=total)
