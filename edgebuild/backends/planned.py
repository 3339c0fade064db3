"""The base of a hardware family whose backend this version does not have yet.

Such a backend is declared like any other, in its own folder (formats, extra),
so a recipe naming its profile validates and plans; the compile stage then fails
with BackendUnavailable and where the work is tracked. The folder's placeholder
is replaced by the real backend when it lands.
"""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn

from pydantic import BaseModel, ConfigDict

from edgebuild.backends.base import Backend, Runner
from edgebuild.core.artifact import Artifact
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.errors import BackendUnavailable


class AnyOptions(BaseModel):
    """Options are checked when the backend exists; until then any are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)


class PlannedBackend(Backend[AnyOptions]):
    tools: ClassVar[tuple[str, ...]] = ()
    implemented = False
    tracking: ClassVar[str]

    def _unavailable(self) -> NoReturn:
        raise BackendUnavailable(
            self.name, f"not implemented in this version of edgebuild ({self.tracking})",
            self.extra)

    def datasets(self, target: Target) -> tuple[str, ...]:
        return ()

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        self._unavailable()

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        self._unavailable()

    def _probe(self, target: Target, purpose: str) -> str | None:
        return self.unmeasurable_reason(target, purpose) if purpose != "build" else None

    def unmeasurable_reason(self, target: Target, purpose: str = "latency") -> str:
        return f"not measurable here: backend '{self.name}' is not implemented yet"

    def device_latency(self, *args: Any, **kwargs: Any) -> None:
        return None
