"""TFLite's per-operator profile on this host, as an OpProfile (measure/record.py).

LiteRT's Python API has no profiler; its C API has one (litert_c.py), run in a process
of its own. The profiler's events, per run (one `Invoke` event of event type DEFAULT
each, whose time is the runtime's own total)::

    Invoke ─┬─ OPERATOR_INVOKE_EVENT (2): a TFLite node on a builtin kernel
            │     tag = its op (`TRANSPOSE`), metadata1 = its node index
            └─ DELEGATE_PROFILED_OPERATOR_INVOKE_EVENT (8): an operator of XNNPACK's
                  own runtime, tag = XNNPACK's kernel (`Convolution (NHWC, QC8) IGEMM`),
                  metadata1 = its index in that delegate partition

Rows: a builtin node is named by the tensor it writes (the first name of the .tflite's
fused tensor name) and typed by its op; an XNNPACK operator is `XNNPACK <partition>:<index>`,
typed by the kernel's name without its layout/precision part (`Convolution IGEMM`, so a
float and an int8 build compare by op type) with the whole kernel name as `exec` (the
precision it ran in: F32, QC8, QS8…). What is not mapped, and why (in the note):
XNNPACK reports its operators, not the TFLite nodes it replaced (it fuses, splits and
adds reshapes, so an order match would be a guess); and onnx2tf names the .tflite's
tensors after its TensorFlow ops (`model_2/tf.nn.convolution_5/convolution`), not after
the ONNX nodes, so no row names an ONNX node.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.errors import StageError
from edgebuild.measure.record import OpProfile, OpRow

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.tflite.litert_c import LiteRtEvent

WARMUP = 3
TIMEOUT_S = 600
DEFAULT, OPERATOR, DELEGATE, DELEGATE_PROFILED = 1, 2, 4, 8  # tflite::Profiler::EventType
SOURCE = "litert profiler (C API)"
NOTE = ("XNNPACK rows are XNNPACK's own operators (partition:index), not the TFLite nodes "
        "it replaced; onnx2tf names the .tflite's tensors after its TensorFlow ops, not the "
        "ONNX nodes: no row is mapped to an ONNX node")
_PRECISION = re.compile(r"\s*\([^)]*\)")  # "(NHWC, F32)" in an XNNPACK kernel's name


def op_profile(model: Path, io: dict[str, Any], threads: int | None, use_xnnpack: bool,
               feeds: dict[str, np.ndarray], runs: int) -> OpProfile:
    """`runs` profiled inferences of `feeds` (recipe layout) after WARMUP, in a process
    of its own; XNNPACK as the timed runs used it (`use_xnnpack`), else builtin kernels."""
    import numpy as np

    from edgebuild.backends.tflite.litert_c import LiteRtProfile
    from edgebuild.backends.tflite.runner import to_model

    count = threads or 1  # the interpreter's default is one thread, as is LiteRT's
    with tempfile.TemporaryDirectory(prefix="edgebuild-tflite-profile-") as scratch:
        folder = Path(scratch)
        arrays, names = {}, {}
        for k, tensor in enumerate(io["inputs"]):
            array = to_model(feeds[tensor["name"]], tensor)
            if list(array.shape) != list(tensor["model_shape"]):
                return OpProfile(source=SOURCE, unmeasurable=(
                    f"not measured: the profile runs the model at its own shape "
                    f"{tensor['model_shape']}, not {list(array.shape)}"))
            arrays[f"input{k}"] = array
            names[tensor["model_name"]] = f"input{k}"
        np.savez(folder / "feeds.npz", **arrays)  # type: ignore[arg-type]
        spec = {"model": str(model), "feeds": str(folder / "feeds.npz"), "inputs": names,
                "threads": count, "builtin": not use_xnnpack, "warmup": WARMUP, "runs": runs}
        (folder / "spec.json").write_text(json.dumps(spec))
        try:
            done = subprocess.run(
                [sys.executable, "-m", "edgebuild.backends.tflite.litert_c",
                 str(folder / "spec.json")],
                capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise StageError(f"the TFLite profile took over {TIMEOUT_S} s") from None
    if done.returncode < 0:  # a signal: most likely a struct that does not fit this library
        raise StageError(f"the LiteRT profiling process died of signal {-done.returncode}",
                         "litert_c.py binds ai-edge-litert 2.3.0's C API; another version "
                         "may lay its structs out differently")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise StageError(f"the LiteRT profiling process failed: {last[:300]}")
    lines = done.stdout.strip().splitlines()
    try:
        found = LiteRtProfile.model_validate_json(lines[-1] if lines else "")
    except ValueError as exc:
        raise StageError(f"the LiteRT profiling process printed no profile ({exc})") from None
    profile = from_events(found.events, node_names(model))
    profile.wall_ms = sum(found.walls_ms) / len(found.walls_ms) if found.walls_ms else None
    profile.threads = found.threads
    return profile


def node_names(model: Path) -> dict[int, str]:
    """TFLite node index -> the name of the tensor it writes (its first fused name)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_path=str(model), experimental_op_resolver_type=(
        OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))
    tensors = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
    found = {}
    for op in interpreter._get_ops_details():  # the only listing of ops the API offers
        outputs = [tensors.get(int(i), "") for i in op["outputs"]]
        name = outputs[0].split(";")[0] if outputs and outputs[0] else ""
        found[int(op["index"])] = name or f"node {op['index']}"
    return found


def runs_of(events: list[LiteRtEvent]) -> list[tuple[int, list[LiteRtEvent]]]:
    """(the runtime's µs, the operator events) of each run, in order."""
    found: list[tuple[int, list[LiteRtEvent]]] = []
    for event in events:
        if event.type == DEFAULT and event.tag == "Invoke":
            found.append((event.us, []))
        elif found and event.type in (OPERATOR, DELEGATE, DELEGATE_PROFILED):
            found[-1][1].append(event)
    return found


def from_events(events: list[LiteRtEvent], names: dict[int, str]) -> OpProfile:
    """The mean per run of each operator over the profiled runs, slowest first."""
    runs = runs_of(events)
    if not runs:
        return OpProfile(source=SOURCE, runs=0,
                         unmeasurable="not measured: the LiteRT profiler recorded no Invoke")
    total_us: dict[str, float] = {}
    kinds: dict[str, tuple[str, str]] = {}
    for _, ops in runs:
        profiled = any(e.type == DELEGATE_PROFILED for e in ops)
        partition, last = -1, None
        for event in ops:
            if event.type == DELEGATE_PROFILED:
                if last is None or event.index <= last:
                    partition += 1
                last = event.index
                node = f"XNNPACK {partition}:{event.index}"
                kind = (_PRECISION.sub("", event.tag).strip() or event.tag,
                        f"XNNPACK {event.tag}")
            else:
                last = None  # a builtin node between two XNNPACK partitions
                if profiled and (event.type == DELEGATE or "Delegate" in event.tag):
                    continue  # the delegate node around the operators it reported
                node = names.get(event.index, f"node {event.index}")
                kind = (event.tag, "builtin kernel" if event.type == OPERATOR else "delegate")
            total_us[node] = total_us.get(node, 0.0) + event.us
            kinds[node] = kind
    count = len(runs)
    ops_ms = sum(total_us.values()) / count / 1000
    rows = [OpRow(node=node, op_type=kinds[node][0], exec=kinds[node][1],
                  ms=us / count / 1000, share=(us / count / 1000) / ops_ms if ops_ms else 0.0)
            for node, us in sorted(total_us.items(), key=lambda item: -item[1])]
    return OpProfile(source=SOURCE, runs=count, rows=rows, ops_ms=ops_ms,
                     runtime_ms=sum(us for us, _ in runs) / count / 1000, note=NOTE)
