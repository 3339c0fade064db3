"""The QNN runner: the compiled context model on the HTP (the x86 emulator here)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta
from edgebuild.backends.qnn.options import QnnOptions

if TYPE_CHECKING:
    import numpy as np


class QnnRunner(Runner):
    """The compiled context model on the HTP (the x86 emulator on this machine)."""

    def __init__(self, model: Path, options: QnnOptions, threads: int | None) -> None:
        super().__init__()
        self.model = model
        self.options = options
        self.threads = threads
        self._session: Any = None

    def _activate(self) -> None:
        from edgebuild.backends.qnn.session import session

        # The compile stage already refused a model with nodes the HTP cannot take (unless
        # `cpu_fallback: report`); the CPU EP left here runs the graph I/O quantization.
        self._session = session(self.model, self.options.provider_options(),
                                cpu_fallback=True, threads=self.threads)

    def _input_metadata(self) -> TensorMeta:
        dtypes = {"tensor(float)": "float32", "tensor(float16)": "float16",
                  "tensor(uint8)": "uint8", "tensor(int8)": "int8", "tensor(int64)": "int64",
                  "tensor(int32)": "int32", "tensor(uint16)": "uint16"}
        return {i.name: (tuple(d if isinstance(d, int) else str(d) for d in i.shape),
                         dtypes.get(i.type, i.type)) for i in self._session.get_inputs()}

    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in self._session.get_outputs()]
        return dict(zip(names, self._session.run(names, feeds), strict=True))

    def _deactivate(self) -> None:
        self._session = None
