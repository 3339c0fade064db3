"""Node counts by op type and size of an ONNX file, for before/after reports."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any


def graph_stats(path: Path) -> dict[str, Any]:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    ops = Counter(node.op_type for node in model.graph.node)
    return {
        "nodes": sum(ops.values()),
        "ops": dict(sorted(ops.items())),
        "bytes": path.stat().st_size,
        "opset": max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                     default=0),
    }
