"""Run a .pte program on this machine with ExecuTorch's runtime (its Python bindings).

`Runtime.get().load_program(path).load_method("forward").execute([...])`: the
same program file and, for the delegated part, the same XNNPACK kernels a phone
runs, here compiled for this CPU. The program takes its inputs positionally in
the recipe's order and was exported at the example shapes (memory-planned), so
the runner's metadata is those fixed shapes.

XNNPACK's thread pool is process-wide in the bindings (`_unsafe_reset_threadpool`);
the runner sets it to the measurement's thread count when one is given.

The bindings are imported without the compiler (`runtime_module`): a stage that runs a
program pays 2 s of imports, not 6.5 s (AVX2 EPYC).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta

if TYPE_CHECKING:
    import numpy as np


def runtime_module() -> types.ModuleType:
    """`executorch.runtime`, without `executorch.exir`'s package body.

    The bindings import one decorator from `executorch.exir._warnings`, and that runs
    `executorch/exir/__init__.py`: the whole compiler, torch.export and the edge
    dialect's 138 KB YAML, 4.5 s that running a .pte never uses. While the runtime is
    imported, `executorch.exir` is an empty package over the real folder, so only the
    submodule asked for loads; it is removed after, and a later `import executorch.exir`
    runs the real one. If the bindings ever need more of the compiler, the plain import
    is used."""
    name = "executorch.runtime"
    if name in sys.modules or "executorch.exir" in sys.modules:
        return importlib.import_module(name)
    spec = importlib.util.find_spec("executorch.exir")
    if spec is None or spec.submodule_search_locations is None:
        return importlib.import_module(name)  # its ImportError names what is missing
    shell = types.ModuleType("executorch.exir")
    shell.__path__ = list(spec.submodule_search_locations)
    shell.__spec__ = spec
    sys.modules["executorch.exir"] = shell
    try:
        return importlib.import_module(name)
    except (ImportError, AttributeError):
        for partial in (name, "executorch.extension.pybindings.portable_lib"):
            sys.modules.pop(partial, None)
    finally:
        if sys.modules.get("executorch.exir") is shell:
            del sys.modules["executorch.exir"]
    return importlib.import_module(name)


class ExecutorchRunner(Runner):
    def __init__(self, program: Path, io: dict[str, Any], threads: int | None) -> None:
        super().__init__()
        self.program, self.io, self.threads = program, io, threads
        self._method: Any = None

    def _activate(self) -> None:
        from edgebuild.backends.executorch.lower import needs_executorch

        with needs_executorch():
            runtime = runtime_module()
            if self.threads:
                from executorch.extension.pybindings.portable_lib import (
                    _unsafe_reset_threadpool,
                )
                _unsafe_reset_threadpool(self.threads)
            program = runtime.Runtime.get().load_program(str(self.program))
            self._method = program.load_method("forward")

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
