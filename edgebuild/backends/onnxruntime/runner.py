"""The ONNX Runtime runner, and the session options a target's options make.

`session_options` is shared by the compile stage (backend.py), the runner and the
per-op profiler (profile.py); it imports onnxruntime only when called.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta
from edgebuild.backends.onnxruntime.options import GraphLevel, OrtOptions
from edgebuild.core.share_cpu import yield_when_idle

if TYPE_CHECKING:
    import numpy as np


def session_options(options: OrtOptions, threads: int | None) -> Any:
    import onnxruntime as ort

    levels = {
        GraphLevel.DISABLE: ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        GraphLevel.BASIC: ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        GraphLevel.EXTENDED: ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        GraphLevel.ALL: ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[options.graph_optimization_level]
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.inter_op_num_threads = 1
    chosen = threads or options.intra_op_threads
    if chosen:
        so.intra_op_num_threads = chosen
    so.log_severity_level = 3
    return yield_when_idle(so)


class SessionRunner(Runner):
    """An ONNX Runtime `InferenceSession` behind the `Runner` template: what a session
    reads and runs. Subclasses open it (`_activate`): with a target's session options
    here, on QNN's HTP in backends/qnn/runner.py."""

    def __init__(self, model: Path, options: Any, threads: int | None) -> None:
        super().__init__()
        self.model = model
        self.options = options
        self.threads = threads
        self._session: Any = None

    def _input_metadata(self) -> TensorMeta:
        dtypes = {"tensor(float)": "float32", "tensor(float16)": "float16",
                  "tensor(int64)": "int64", "tensor(int32)": "int32",
                  "tensor(int8)": "int8", "tensor(uint8)": "uint8",
                  "tensor(uint16)": "uint16", "tensor(bool)": "bool"}
        return {
            i.name: (tuple(d if isinstance(d, int) else str(d) for d in i.shape),
                     dtypes.get(i.type, i.type))
            for i in self._session.get_inputs()
        }

    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in self._session.get_outputs()]
        return dict(zip(names, self._session.run(names, feeds), strict=True))

    def _deactivate(self) -> None:
        self._session = None


class OrtRunner(SessionRunner):
    options: OrtOptions

    def _activate(self) -> None:
        from edgebuild.customops.ort import session

        # The artifact is already optimized; do not spend time re-optimizing.
        so = session_options(self.options, self.threads)
        self._session = session(self.model, so, self.options.execution_providers)
