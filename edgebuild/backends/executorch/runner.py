"""Run a .pte program on this machine with ExecuTorch's runtime (its Python bindings).

`Runtime.get().load_program(path).load_method("forward").execute([...])`: the
same program file and, for the delegated part, the same XNNPACK kernels a phone
runs, here compiled for this CPU. The program takes its inputs positionally in
the recipe's order and was exported at the example shapes (memory-planned), so
the runner's metadata is those fixed shapes.

XNNPACK's thread pool is process-wide in the bindings (`_unsafe_reset_threadpool`);
the runner sets it to the measurement's thread count when one is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta

if TYPE_CHECKING:
    import numpy as np


class ExecutorchRunner(Runner):
    def __init__(self, program: Path, io: dict[str, Any], threads: int | None) -> None:
        super().__init__()
        self.program, self.io, self.threads = program, io, threads
        self._method: Any = None

    def _activate(self) -> None:
        from edgebuild.backends.executorch.lower import needs_executorch

        with needs_executorch():
            from executorch.runtime import Runtime

            if self.threads:
                from executorch.extension.pybindings.portable_lib import (
                    _unsafe_reset_threadpool,
                )
                _unsafe_reset_threadpool(self.threads)
            self._method = Runtime.get().load_program(str(self.program)).load_method("forward")

    def _input_metadata(self) -> TensorMeta:
        return {t["name"]: (tuple(t["shape"]), t["dtype"]) for t in self.io["inputs"]}

    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import numpy as np
        import torch

        inputs = [torch.from_numpy(np.ascontiguousarray(feeds[t["name"]]))
                  for t in self.io["inputs"]]
        outputs = self._method.execute(inputs)
        # The runtime's output tensors live in its planned memory: copied before the next run.
        return {name: np.array(value.detach().float().numpy(), dtype=np.float32)
                for name, value in zip(self.io["outputs"], outputs, strict=True)}

    def _deactivate(self) -> None:
        self._method = None
