"""The Backend and Runner interfaces.

Public methods check state and inputs, then call the `_`-prefixed methods a
backend implements (template method, as in Polygraphy's runners), so every
backend reports misuse the same way.
"""

from __future__ import annotations

import platform
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from edgebuild.errors import DataError
from edgebuild.passes.base import OpResult, TargetInfo

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.cache.store import Artifact
    from edgebuild.data.loaders import Samples
    from edgebuild.recipe.common import MeasureSettings

TensorMeta = dict[str, tuple[tuple[int | str, ...], str]]  # name -> (shape, dtype)


class Runner(ABC):
    """Loads a compiled artifact and runs inference; use as a context manager."""

    def __init__(self) -> None:
        self.is_active = False

    def activate(self) -> None:
        if self.is_active:
            raise RuntimeError(f"{type(self).__name__} is already active")
        self._activate()
        self.is_active = True

    def deactivate(self) -> None:
        if self.is_active:
            self._deactivate()
            self.is_active = False

    def input_metadata(self) -> TensorMeta:
        self._require_active()
        return self._input_metadata()

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once. Checks that input names, ranks and dtypes match the model."""
        self._require_active()
        expected = self._input_metadata()
        missing = sorted(set(expected) - set(feeds))
        extra = sorted(set(feeds) - set(expected))
        if missing or extra:
            raise DataError(f"inputs do not match the model: missing {missing}, unexpected {extra}")
        for name, (shape, dtype) in expected.items():
            array = feeds[name]
            if str(array.dtype) != dtype:
                raise DataError(f"input '{name}' has dtype {array.dtype}, the model wants {dtype}")
            if len(array.shape) != len(shape) or any(
                isinstance(d, int) and d != a for d, a in zip(shape, array.shape, strict=True)
            ):
                raise DataError(f"input '{name}' has shape {list(array.shape)}, "
                                f"the model wants {list(shape)}")
        return self._infer(feeds)

    def _require_active(self) -> None:
        if not self.is_active:
            raise RuntimeError(f"{type(self).__name__} is not active; use it in a `with` block")

    def __enter__(self) -> Runner:
        self.activate()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.deactivate()

    @abstractmethod
    def _activate(self) -> None: ...

    @abstractmethod
    def _input_metadata(self) -> TensorMeta: ...

    @abstractmethod
    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def _deactivate(self) -> None:  # noqa: B027 - optional hook
        pass


class Backend(ABC):
    """Compiles an artifact for a target and makes runners for the result."""

    name: ClassVar[str]
    summary: ClassVar[str]
    accepts: ClassVar[tuple[str, ...]]
    produces: ClassVar[str]
    Options: ClassVar[type[BaseModel]]
    tools: ClassVar[tuple[str, ...]]  # distributions whose versions enter the cache key

    def options(self, target: TargetInfo) -> BaseModel:
        return self.Options.model_validate(target.options)

    @abstractmethod
    def compile(self, model: Artifact, target: TargetInfo, out: Path,
                calibration: Samples | None = None) -> OpResult:
        """Turn `model` into this backend's native artifact under `out`.

        `calibration` is the dataset named by the target's `calibration_dataset`
        option, for backends that quantize while they convert (TFLite full INT8).
        """

    @abstractmethod
    def runner(self, artifact: Artifact, target: TargetInfo, threads: int | None) -> Runner:
        """A runner for a compiled artifact on the target's device."""

    def unmeasurable_reason(self, target: TargetInfo, purpose: str = "latency") -> str:
        """'' when this machine can run the target's artifacts, else why not.

        `purpose` is "accuracy" or "latency": a backend may check accuracy on a
        host interpreter while latency needs the real device.
        """
        runs_on = target.profile.get("runs_on", {}).get("kind", "host")
        if runs_on != "host":
            return (f"not measurable here: target '{target.name}' runs on a {runs_on} "
                    f"device and no {runs_on} runner is configured")
        arch = target.profile["device"]["arch"]
        if arch != platform.machine():
            return f"not measurable here: needs {arch}, this machine is {platform.machine()}"
        return ""

    def where(self, target: TargetInfo, purpose: str = "latency") -> str:
        """Where the figures for `purpose` come from, when it is not simply the target's
        own device (a host interpreter standing in for a phone, say); else ''."""
        return ""

    def device_latency(self, artifact: Artifact, target: TargetInfo,
                       settings: MeasureSettings) -> dict[str, Any] | None:
        """Latency measured by a device's own tool (ms statistics), or None to time
        `runner().infer` in this process with the latency protocol."""
        return None
