"""Which nodes the HTP took and which fell back to the CPU, per op type.

An EPContext model is the compiled result: each node QNN took is inside an
`EPContext` node (com.microsoft), and every node it did not take is still there as
itself, to run on the CPU EP. So the partition is read off the compiled model, and
the op types inside the HTP partitions are the source model's minus the leftovers.
A node the HTP cannot take is what teams discover too late on the phone; this
table shows it at build time.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Partition:
    htp: Counter[str]  # op type -> nodes inside HTP partitions
    cpu: dict[str, list[str]]  # op type -> names of the nodes the HTP could not take
    io: list[str]  # the graph input's Quantize / output's Dequantize, on the CPU by design
    contexts: int  # EPContext nodes (HTP partitions)

    @property
    def cpu_nodes(self) -> int:
        return sum(len(names) for names in self.cpu.values())

    def summary(self) -> dict[str, object]:
        return {"htp_nodes": sum(self.htp.values()), "cpu_nodes": self.cpu_nodes,
                "io_quantization_on_cpu": len(self.io), "htp_partitions": self.contexts,
                "cpu_op_types": sorted(self.cpu)}


def partition(source: Path, compiled: Path) -> Partition:
    import onnx

    source_ops = Counter(n.op_type for n in onnx.load(str(source)).graph.node)
    graph = onnx.load(str(compiled)).graph
    inputs = {v.name for v in graph.input}
    outputs = {v.name for v in graph.output}
    cpu: dict[str, list[str]] = {}
    io: list[str] = []
    contexts = 0
    left: Counter[str] = Counter()
    for node in graph.node:
        if node.op_type == "EPContext":
            contexts += 1
            continue
        left[node.op_type] += 1
        # onnxruntime-qnn runs the graph input's Quantize and the output's Dequantize on
        # the CPU by default (offload_graph_io_quantization): a design, not a fallback.
        if (node.op_type == "QuantizeLinear" and node.input[0] in inputs) or (
                node.op_type == "DequantizeLinear" and node.output[0] in outputs):
            io.append(node.name or node.op_type)
        else:
            cpu.setdefault(node.op_type, []).append(node.name or "(unnamed)")
    return Partition(source_ops - left, cpu, io, contexts)


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


def _cell(text: str) -> str:
    """A node name or op type (the ONNX file wrote them) as one table cell: a `|` or a
    newline in it would add a column or end the table. The report makes HTML and links
    inert (report/render.py `md_block`)."""
    return _CONTROL.sub(" ", text.replace("\\", "\\\\").replace("|", "\\|"))


def render_markdown(found: Partition, soc: str) -> str:
    io = (f"; the graph input's quantize and output's dequantize ({len(found.io)}) run on "
          "the CPU by design" if found.io else "")
    lines = [f"### QNN HTP partition ({soc})", "",
             f"{sum(found.htp.values())} nodes on the HTP in {found.contexts} partition(s), "
             f"{found.cpu_nodes} fell back to the CPU{io}.", "",
             "| op type | on HTP | on CPU | CPU nodes |", "|---|---|---|---|"]
    for op in sorted(set(found.htp) | set(found.cpu)):
        names = found.cpu.get(op, [])
        shown = ", ".join(names[:5]) + (f" (+{len(names) - 5})" if len(names) > 5 else "")
        lines.append(f"| {_cell(op)} | {found.htp.get(op, 0)} | {len(names)} | "
                     f"{_cell(shown)} |")
    return "\n".join(lines) + "\n"
