"""How the quantize pass writes its model, from the params:

    budget          ─▶ search/budget.search: the cheapest lever that passes the gate
    emit corrected-float ─▶ levers/bias_correction.corrected_float: float, biases corrected
    accuracy_aware  ─▶ search/accuracy_aware: layers kept float until the drop is in budget
    otherwise       ─▶ prepare.quantize_prepared: as written

Imported only inside the worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.quant.prepare import prepare, quantize_prepared

if TYPE_CHECKING:
    from edgebuild.core.op import StageContext
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.params import QuantizeParams
    from edgebuild.quant.prepared import Prepared


def write(ctx: StageContext, source: Path, destination: Path, p: QuantizeParams,
          calibration: Samples | None, scratch: Path,
          metadata: dict[str, Any]) -> tuple[Prepared, QuantizeParams]:
    """Write `destination`: by the fidelity budget, accuracy-aware, or as the params say.
    Returns the float model quantized and the params used (the budget's choice)."""
    if p.budget is not None:
        from edgebuild.quant.search.budget import search

        evaluation = ctx.dataset(p.budget.gate.dataset)
        prepared, chosen, metadata["budget"] = search(source, destination, p, calibration,
                                                      evaluation, scratch, ctx.io.state)
        return prepared, chosen
    prepared = prepare(source, p, calibration, scratch)
    if p.emit == "corrected-float":
        from edgebuild.quant.levers.bias_correction import corrected_float

        assert calibration is not None
        corrected_float(prepared, destination, p, calibration, scratch)
    elif p.accuracy_aware is not None:
        from edgebuild.quant.search.accuracy_aware import accuracy_aware

        evaluation = ctx.dataset(p.accuracy_aware.dataset)
        metadata["accuracy_aware"] = accuracy_aware(
            prepared, destination, p, calibration, evaluation, scratch)
    else:
        quantize_prepared(prepared, destination, p, calibration, prepared.exclude, scratch)
    return prepared, p
