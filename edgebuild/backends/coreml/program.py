"""What can be checked of a Core ML model without a Mac: its MIL program.

The op list (with each op's output precision) is read from the saved .mlpackage,
and each op is looked up in the Neural Engine table (ane_rules.py): ops known to
fall back to the GPU/CPU, and general rules (fp32 compute, flexible shapes). This
is a static estimate from public sources, labelled as such; Core ML decides the
real placement on the device (Xcode's performance report shows it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgebuild.backends.coreml.ane_rules import GENERAL_RULES, OP_RULES, SOURCES

# Ops that only hold or decompress weights at load time: they run nowhere at inference.
LOAD_TIME = ("const", "constexpr_")


@dataclass
class ProgramOps:
    """The ops of the main function (nested blocks included), by (type, precision)."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    flexible_inputs: list[str] = field(default_factory=list)
    opset: str = ""
    io_casts: int = 0  # casts between the float32 I/O and an fp16 program
    consts: dict[str, tuple[int, ...] | None] = field(default_factory=dict)

    def compute_ops(self) -> Counter[tuple[str, str]]:
        return Counter({k: n for k, n in self.counts.items() if not k[0].startswith(LOAD_TIME)})

    def weight_ops(self) -> Counter[str]:
        found: Counter[str] = Counter()
        for (op, _), n in self.counts.items():
            if op.startswith("constexpr_"):
                found[op] += n
        return found


def read_program(path: Path) -> ProgramOps:
    from edgebuild.backends.coreml.convert import quiet_coremltools

    with quiet_coremltools() as ct:
        from coremltools.proto import MIL_pb2

        spec = ct.models.MLModel(str(path), skip_model_load=True).get_spec()
    function = spec.mlProgram.functions["main"]
    found = ProgramOps(opset=function.opset)
    block = function.block_specializations[function.opset]
    boundary = {i.name for i in function.inputs} | set(block.outputs)
    for op in block.operations:
        touches = {a.name for arg in op.inputs.values() for a in arg.arguments} | {
            o.name for o in op.outputs}
        if op.type == "cast" and touches & boundary:
            found.io_casts += 1
    _walk(block, found, MIL_pb2)
    for feature in spec.description.input:
        array = feature.type.multiArrayType
        if array.WhichOneof("ShapeFlexibility") is not None:
            found.flexible_inputs.append(feature.name)
    return found


def _walk(block: Any, found: ProgramOps, mil: Any) -> None:
    for op in block.operations:
        if op.type == "const":
            found.consts[op.outputs[0].name] = _ints(op.attributes["val"])
        kind = op.outputs[0].type if op.outputs else None
        dtype = (mil.DataType.Name(kind.tensorType.dataType).lower()
                 if kind is not None and kind.HasField("tensorType") else "-")
        found.counts[(_refined(op, found.consts), dtype)] += 1
        for inner in op.blocks:  # cond / while_loop bodies
            _walk(inner, found, mil)


def _ints(value: Any) -> tuple[int, ...] | None:
    """A small integer constant (strides, kernel sizes, dilations), else None."""
    if not value.HasField("immediateValue"):
        return None
    tensor = value.immediateValue.tensor
    return tuple(tensor.ints.values) if tensor.WhichOneof("value") == "ints" else None


def _argument(op: Any, name: str, consts: dict[str, tuple[int, ...] | None]) -> tuple[
        int, ...] | None:
    if name not in op.inputs or not op.inputs[name].arguments:
        return None
    argument = op.inputs[name].arguments[0]
    if argument.HasField("name"):
        return consts.get(argument.name)
    return _ints(argument.value) if argument.HasField("value") else None


def _refined(op: Any, consts: dict[str, tuple[int, ...] | None]) -> str:
    """The op type, split where the Neural Engine rules depend on its attributes."""
    if op.type == "conv":
        dilations = _argument(op, "dilations", consts)
        if dilations is not None:
            return "conv (dilated)" if any(d > 1 for d in dilations) else "conv"
    if op.type in ("max_pool", "avg_pool", "l2_pool"):
        kernel, strides = _argument(op, "kernel_sizes", consts), _argument(op, "strides",
                                                                             consts)
        if kernel is not None and strides is not None:
            large = max(kernel) > 13 or max(strides) > 2
            return f"{op.type} ({'kernel > 13 or stride > 2' if large else 'small'})"
    return str(op.type)


def _rule(key: str) -> str:
    return next(rule for name, rule, _ in GENERAL_RULES if name == key)


@dataclass
class AneRow:
    op: str
    dtype: str
    count: int
    status: str  # ane | fallback | partial | unknown
    reason: str
    source: str


def ane_table(ops: ProgramOps) -> list[AneRow]:
    rows = []
    counts = ops.compute_ops()
    if ops.io_casts:  # the float32 I/O <-> fp16 conversions Core ML adds at the boundary
        for dtype in ("float16", "float32"):
            boundary = min(counts[("cast", dtype)], ops.io_casts)
            counts[("cast", dtype)] -= boundary
            counts[("cast (model I/O)", dtype)] += boundary
    for (op, dtype), count in sorted((+counts).items()):
        status, reason, source = OP_RULES.get(op, ("unknown", "not in the table", ""))
        if op == "cast (model I/O)":
            status, reason, source = "io", "float32 I/O converted at the boundary", ""
        elif dtype in ("fp32", "float32") and status != "fallback":
            status, reason, source = ("fallback", _rule("fp32"), "ane-fp16")
        rows.append(AneRow(op, dtype, count, status, reason, source))
    return rows


def summary(rows: list[AneRow], ops: ProgramOps) -> dict[str, Any]:
    by_status: Counter[str] = Counter()
    for row in rows:
        by_status[row.status] += row.count
    return {"ops": sum(r.count for r in rows), "by_status": dict(sorted(by_status.items())),
            "fallback_ops": sorted({r.op for r in rows if r.status == "fallback"}),
            "weight_ops": dict(ops.weight_ops()), "flexible_inputs": ops.flexible_inputs,
            "opset": ops.opset}


def render_markdown(rows: list[AneRow], ops: ProgramOps, title: str) -> str:
    lines = [f"# Core ML program: {title}", "",
             "Static estimate of Neural Engine placement from public sources (below); "
             "Core ML decides on the device. Weight ops run at load time and are not listed.",
             "", "| op | precision | count | Neural Engine | why |", "|---|---|---|---|---|"]
    for r in rows:
        cite = f" [{r.source}]" if r.source else ""
        lines.append(f"| {r.op} | {r.dtype} | {r.count} | {r.status} | {r.reason}{cite} |")
    if ops.weight_ops():
        lines += ["", "Compressed weights: " + ", ".join(
            f"{n} × {op}" for op, n in sorted(ops.weight_ops().items()))]
    if ops.flexible_inputs:
        lines += ["", f"Flexible-shape inputs: {', '.join(ops.flexible_inputs)} — "
                  + _rule("flexible")]
    lines += ["", "Sources:"] + [f"- [{key}] {where}" for key, where in SOURCES.items()]
    return "\n".join(lines) + "\n"
