"""The size gate: the compiled artifact's shipped bytes against `size.max_mb`.

    compile stage ─▶ artifact.shipped_bytes ─▶ size  (no measuring stage of its own)
"""

from __future__ import annotations

from pathlib import Path

from edgebuild.gates.kind import (
    GateKind,
    TargetRecords,
    blocked_by,
    not_run,
    passed_if,
)
from edgebuild.gates.result import GateResult
from edgebuild.recipe.models import Gates, Policy


class SizeKind(GateKind):
    key = "size"

    def evaluate(self, target: str, gates: Gates, records: TargetRecords, policy: Policy,
                 keep_samples: bool, memo: Path | None) -> list[GateResult]:
        if gates.size is None:
            return []
        compiled = records.run(records.compiled)
        if compiled is None or compiled.artifact is None:
            # A compile this machine cannot run (Backend.compile_probe) is unmeasurable, as
            # the policy says; a compile that failed or never ran is not.
            blocked = blocked_by(target, "size", compiled, policy)
            return [blocked if blocked is not None else not_run(target, "size", compiled)]
        size_mb = compiled.artifact.shipped_bytes / 1e6
        ok = size_mb <= gates.size.max_mb
        return [GateResult(
            target=target, gate="size", status=passed_if(ok), counts_as_failure=not ok,
            measured={"mb": round(size_mb, 3)}, limits={"max_mb": gates.size.max_mb},
            message=f"artifact is {size_mb:.2f} MB "
                    f"({'within' if ok else 'over'} the {gates.size.max_mb:g} MB limit)")]
