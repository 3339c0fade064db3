"""Evaluate a target's gates from the artifacts its stages produced.

Pure functions of cached data: a fully cached run re-evaluates every gate in
milliseconds, and a changed limit never forces a re-measurement. Each kind of gate is
one module in `gates/kinds/` (gates/kind.py: the protocol); this loop knows none by name:

    Gates + the target's TargetRecords ─▶ for kind in KINDS ─▶ kind.evaluate ─▶ [GateResult]
"""

from __future__ import annotations

from pathlib import Path

from edgebuild.gates.kinds import KINDS
from edgebuild.gates.records import TargetRecords
from edgebuild.gates.result import GateResult
from edgebuild.recipe.models import Gates, Policy


def evaluate_target(target: str, gates: Gates, records: TargetRecords, policy: Policy,
                    keep_samples: bool = True, memo: Path | None = None
                    ) -> list[GateResult]:
    """Every gate of one target (or search candidate), from the records the driver hands
    over (run/records.py: its stages' runs); `keep_samples`: latency samples
    go into the latency gate's details (for `edgebuild compare`); `memo`: the cache folder
    whose memo (cache/memo.py) keeps what was read from stored files in earlier runs — an
    accuracy judgement, a latency gate's subsampled samples — by their content."""
    results = []
    for kind in KINDS:
        results += kind.evaluate(target, gates, records, policy, keep_samples, memo)
    return results
