"""The float model the quantizer sees, and what the levers measured on it once.

One stage quantizes the same float model many times (a budget's trials, an
accuracy-aware search, a sensitivity ranking); what is measured once for all of
them — bias shifts, reduce_range's overrides, the nodes kept float — travels here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


@dataclass
class Prepared:
    """The float model the quantizer sees, after the float-side levers.

    `path` is the source, or its equalized copy; `shifts` (bias correction,
    per node) are measured on the first quantization and then applied to the
    nodes each later quantization actually quantizes: a layer kept in float
    keeps its own bias.
    """

    source: Path
    path: Path
    metadata: dict[str, Any] = field(default_factory=dict)
    shifts: dict[str, np.ndarray] | None = None
    reduced: dict[str, Any] | None = None  # reduce_range auto: TensorQuantOverrides
    exclude: list[str] = field(default_factory=list)  # kept float: exclude_nodes + the rules

