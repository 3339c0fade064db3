"""Evaluate a target's gates from the artifacts its stages produced.

Pure functions of cached data: a fully cached run re-evaluates every gate in
milliseconds, and a changed limit never forces a re-measurement. Each kind of gate is
one module in `gates/kinds/` (gates/kind.py: the protocol); this loop knows none by name:

    Gates + the target's stage runs ─▶ for kind in KINDS ─▶ kind.evaluate ─▶ [GateResult]
"""

from __future__ import annotations

from pathlib import Path

from edgebuild.gates.kind import ExecutionResult, TargetStages
from edgebuild.gates.kinds import KINDS
from edgebuild.gates.result import GateResult
from edgebuild.recipe.models import Gates, Policy


def evaluate_target(target: str, gates: Gates, stages: TargetStages,
                    execution: ExecutionResult, policy: Policy,
                    keep_samples: bool = True, memo: Path | None = None
                    ) -> list[GateResult]:
    """Every gate of one target (or search candidate); `keep_samples`: latency samples
    go into the latency gate's details (for `edgebuild compare`); `memo`: the cache folder
    whose memo (cache/memo.py) keeps what was read from stored files in earlier runs — an
    accuracy judgement, a latency gate's subsampled samples — by their content."""
    results = []
    for kind in KINDS:
        results += kind.evaluate(target, gates, stages, execution, policy, keep_samples, memo)
    return results
