"""The custom ops a stage declared, active for the whole stage process.

A stage that loads a model (an export, an optimization, a compile, a session for
accuracy or latency) may meet a custom node anywhere below its own code: in a
backend's runner, in a pass's helper. Rather than thread the declarations
through every signature, the worker activates the ones in the stage's spec for
the process that runs that one stage (execute/worker.py), and the session
helpers read them here. A stage whose spec has none sees none.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgebuild.recipe.custom_ops import CustomOp


@dataclass(frozen=True)
class Declared:
    """The recipe's custom ops, and the folder their file paths are relative to."""

    ops: dict[str, CustomOp] = field(default_factory=dict)
    base_dir: Path = Path()

    def __bool__(self) -> bool:
        return bool(self.ops)

    def domains(self) -> dict[str, int]:
        """Custom domain -> its opset version."""
        return {op.domain: op.version for op in self.ops.values()}

    def find(self, op_type: str, domain: str) -> CustomOp | None:
        op = self.ops.get(op_type)
        return op if op is not None and op.domain == domain else None

    def load(self, ref: str) -> Any:
        from edgebuild.recipe.files import load_callable

        return load_callable(ref, self.base_dir)


_active = Declared()


def active() -> Declared:
    return _active


@contextmanager
def activated(ops: dict[str, Any] | None, base_dir: Path) -> Iterator[Declared]:
    """Make `ops` (plain data from a stage spec) the declared custom ops while the
    block runs."""
    global _active
    previous = _active
    _active = Declared({name: CustomOp.model_validate(data) for name, data in
                        (ops or {}).items()}, base_dir)
    try:
        yield _active
    finally:
        _active = previous
