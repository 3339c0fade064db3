"""The QNN runner: the compiled context model on the HTP (the x86 emulator here)."""

from __future__ import annotations

from edgebuild.backends.onnxruntime.runner import SessionRunner
from edgebuild.backends.qnn.options import QnnOptions


class QnnRunner(SessionRunner):
    """The compiled context model on the HTP (the x86 emulator on this machine)."""

    options: QnnOptions

    def _activate(self) -> None:
        from edgebuild.backends.qnn.session import session

        # The compile stage already refused a model with nodes the HTP cannot take (unless
        # `cpu_fallback: report`); the CPU EP left here runs the graph I/O quantization.
        self._session = session(self.model, self.options.provider_options(),
                                cpu_fallback=True, threads=self.threads)
