"""What an accuracy gate decided, as a value: light (no numpy), so a fully cached run can
read a judgement back from the memo (cache/memo.py) without comparing outputs again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgebuild.fidelity.limits import LIMITS


@dataclass
class Judgement:
    """Truthy when every limit the gate sets is measured and met. `measured`: every figure
    of the comparison; `limits`: the gate's limits by key (LIMITS' order); `failures`: each
    limit missed or not measurable, as the message lists them (empty when the outputs could
    not be compared or the gate refused them: `message` says why); `details`: what explains
    the figures (flips, the worst channel, `refused`)."""

    passed: bool
    message: str
    measured: dict[str, float] = field(default_factory=dict)
    limits: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def headroom(self) -> float:
        """The smallest headroom over the gate's limits (Limit.headroom): -inf when one
        could not be measured, or nothing was."""
        if not self.measured:
            return float("-inf")
        return min((LIMITS[key].headroom(self.measured.get(LIMITS[key].metric), limit)
                    for key, limit in self.limits.items()), default=float("inf"))
