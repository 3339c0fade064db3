"""What a dataset loads into (`Samples`), one image's detection labels (`ImageBoxes`), and
how a stream's sample is cut into steps (`Steps`).

In core because a stage's context hands them out (`StageContext.dataset`), so every op
in every layer reads them; the loaders that make them (data/loaders.py, data/boxes.py)
and the stream evaluation that walks their `Steps` (data/stream.py) stay in `data`.
They are numpy arrays, but core is on the CLI's light path: numpy is imported only where
a method computes with it, never when the module loads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edgebuild.errors import DataError

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class ImageBoxes:
    """One image's labelled objects: boxes M×4 (x1, y1, x2, y2) float64, classes M int64."""

    boxes: np.ndarray
    classes: np.ndarray

    @staticmethod
    def empty() -> ImageBoxes:
        import numpy as np

        return ImageBoxes(np.zeros((0, 4)), np.zeros(0, dtype=np.int64))


@dataclass(frozen=True)
class Steps:
    """A dataset's `stream:` resolved against the declared inputs."""

    dataset: str
    input: str  # the input cut into steps
    axis: int  # along this axis of it (0 is the batch)
    window: int  # the input's declared size along `axis`
    hop: int  # new values per step
    reset: str  # "sample" | "never"

    def count(self, length: int) -> int:
        """Steps in a sequence of `length` values (a tail shorter than a hop is dropped)."""
        return length // self.hop

    def windows(self, values: np.ndarray) -> Iterator[np.ndarray]:
        """The consecutive windows of one fed sample, in order: each `hop` new values after
        the previous window's last `window - hop`, zeros before the first."""
        import numpy as np

        context = self.window - self.hop
        pad = list(values.shape)
        pad[self.axis] = context
        padded = np.concatenate([np.zeros(pad, values.dtype), values], axis=self.axis)
        for step in range(self.count(values.shape[self.axis])):
            index: list[Any] = [slice(None)] * values.ndim
            index[self.axis] = slice(step * self.hop, step * self.hop + self.window)
            yield np.ascontiguousarray(padded[tuple(index)])


@dataclass
class Samples:
    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None
    names: list[str]
    boxes: list[ImageBoxes] | None = None  # detection labels, one entry per sample
    # Inputs without a sample axis (`batch_axis: null`): fed as the dataset gives them.
    unbatched: frozenset[str] = frozenset()
    # A stream (`stream:`): each sample is a sequence, cut into steps (data/stream.py).
    steps: Steps | None = None

    def __len__(self) -> int:
        return len(self.names)

    def feed(self, index: int) -> dict[str, np.ndarray]:
        """Inputs of one sample: batch dimension kept (shape 1×…), except for an input
        without one, fed as it is (a recurrent state [2, 1, 128], a scalar [])."""
        if self.steps is not None:
            raise DataError(f"dataset '{self.steps.dataset}' is a stream: its samples are "
                            "whole sequences, which only accuracy gates evaluate, step by "
                            "step", "give this stage a dataset of single steps")
        return self.sequence(index)

    def sequence(self, index: int) -> dict[str, np.ndarray]:
        """`feed`, also for a stream's sample: the whole sequence, uncut."""
        return {k: v[index, ...] if k in self.unbatched else v[index : index + 1]
                for k, v in self.inputs.items()}
