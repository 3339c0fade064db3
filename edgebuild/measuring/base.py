"""TargetOp: a stage that runs its target's compiled artifact on this machine.

    run ─ load_backend ─ unmeasurable_reason(target, probes) ─ "" ──▶ _run(ctx, backend, params)
                                                             └ why ─▶ _unmeasurable(…, why)

The public `run` asks the backend first, once for every measuring stage; a stage overrides
`_run` (and `_unmeasurable` only if it still has something to store: measure-latency's
profile without a latency). What a target cannot measure here is stored as its reason,
never raised: the gate reads it, and `policy.unmeasurable` decides.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.registry import backend_tools, load_backend

if TYPE_CHECKING:
    from edgebuild.backends.base import Backend
    from edgebuild.core.target import Target


class TargetOp(Op):
    accepts = ("*",)
    target_specific = True
    probes: ClassVar[str] = "latency"  # the purpose `unmeasurable_reason` is asked about

    def tool_names(self, target: Target | None) -> tuple[str, ...]:
        """The target backend's tools, then the stage's own."""
        assert target is not None
        return (*backend_tools(target.backend), *self.tools)

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        assert ctx.target is not None
        backend = load_backend(ctx.target.backend)
        # An emulated board's time is the emulator's, whatever the backend could time.
        reason = (ctx.target.emulated_reason(self.probes)
                  or backend.unmeasurable_reason(ctx.target, self.probes))
        if reason:
            return self._unmeasurable(ctx, backend, params, reason)
        return self._run(ctx, backend, params)

    def _unmeasurable(self, ctx: StageContext, backend: Backend, params: Any,
                      reason: str) -> OpResult:
        """Nothing measured: the stage stores why."""
        return OpResult(main="", format=self.produces, unmeasurable=reason)

    @abstractmethod
    def _run(self, ctx: StageContext, backend: Backend, params: Any) -> OpResult:
        """Measure on this machine (it can: `unmeasurable_reason` said so)."""
