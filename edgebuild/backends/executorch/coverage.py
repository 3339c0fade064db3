"""Delegate coverage of a lowered program: per operator, how many nodes the delegate
(XNNPACK) took and how many stayed on ExecuTorch's portable kernels.

Read with ExecuTorch's own `executorch.devtools.backend_debug.get_delegation_info`
on the partitioned edge program (the graph the .pte serializes). `getitem` nodes,
which only unpack a delegate call's outputs, are left out of the table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

NOTE = "executorch_delegation.md"
_BOOKKEEPING = {"getitem"}


@dataclass(frozen=True)
class OpRow:
    op: str  # ExecuTorch's edge op name, e.g. aten_convolution_default
    delegated: int
    portable: int


def coverage(edge: Any) -> tuple[list[OpRow], int]:
    """(one row per operator type, the number of delegated subgraphs)."""
    from executorch.devtools.backend_debug import get_delegation_info

    info = get_delegation_info(edge.exported_program().graph_module)
    rows = [OpRow(op, b.delegated, b.non_delegated)
            for op, b in sorted(info.delegation_by_operator.items()) if op not in _BOOKKEEPING]
    return rows, int(info.num_delegated_subgraphs)


def summary(rows: list[OpRow], subgraphs: int, delegate: str) -> dict[str, Any]:
    return {"delegate": delegate, "subgraphs": subgraphs,
            "delegated_nodes": sum(r.delegated for r in rows),
            "portable_nodes": sum(r.portable for r in rows),
            "portable_ops": [r.op for r in rows if r.portable],
            "ops": [asdict(r) for r in rows]}


def render_markdown(rows: list[OpRow], subgraphs: int, delegate: str, title: str) -> str:
    delegated = sum(r.delegated for r in rows)
    portable = sum(r.portable for r in rows)
    total = delegated + portable
    share = f"{100 * delegated / total:.0f} %" if total else "no ops"
    lines = [f"# ExecuTorch delegation: {title}", "",
             f"{delegate}: {delegated} of {total} nodes ({share}) in {subgraphs} delegated "
             f"subgraph(s); {portable} on the portable kernels. From "
             "executorch.devtools.backend_debug.get_delegation_info on the lowered program "
             "(the same partition the phone runs; `getitem` unpacking left out).", "",
             f"| op | {delegate} | portable |", "|---|---|---|"]
    lines += [f"| {r.op} | {r.delegated} | {r.portable} |" for r in rows]
    if portable:
        lines += ["", "Portable ops run ExecuTorch's portable (reference, unvectorized) C++ "
                  "kernels between delegate calls; each one between two delegated ops "
                  "splits the graph into another delegate call."]
    return "\n".join(lines) + "\n"
