"""Core ML prediction on macOS: MLModel.predict, the only place Core ML numerics exist.

Written against coremltools' real API; on Linux coremltools has no native runtime
(`predict` raises "only supported on macOS"), so the backend never builds this
runner there and reports "not measurable here: needs macOS" instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta
from edgebuild.backends.coreml.proxy import tensor_meta

if TYPE_CHECKING:
    import numpy as np


class CoreMlRunner(Runner):
    def __init__(self, package: Path, tensors: list[dict[str, Any]], outputs: list[str],
                 compute_units: str) -> None:
        super().__init__()
        self.package, self.tensors, self.outputs = package, tensors, outputs
        self.compute_units = compute_units
        self._model: Any = None

    def _activate(self) -> None:
        from edgebuild.backends.coreml.convert import quiet_coremltools

        with quiet_coremltools() as ct:
            self._model = ct.models.MLModel(
                str(self.package), compute_units=getattr(ct.ComputeUnit,
                                                         self.compute_units.upper()))

    def _input_metadata(self) -> TensorMeta:
        return tensor_meta(self.tensors)

    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import numpy as np

        result = self._model.predict(feeds)
        return {name: np.asarray(result[name], dtype=np.float32) for name in self.outputs}

    def _deactivate(self) -> None:
        self._model = None
