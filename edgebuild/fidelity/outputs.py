"""The outputs file (`outputs.npz`): what a reference, an infer stage or the quantizer's
budget stores from its calls, and what every comparison reads back.

    output:<name>   every call's rows of that output (samples, or steps of a stream)
    labels          the dataset's labels, when it has them
    truth:boxes     labelled boxes of a detection dataset, all in one array,
    truth:classes     with their classes
    truth:counts      and a count per sample (the boxes are ragged)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np


class _Boxes(Protocol):
    @property
    def boxes(self) -> np.ndarray: ...
    @property
    def classes(self) -> np.ndarray: ...


class Labelled(Protocol):
    """What the file keeps of the samples the outputs came from (data/loaders.Samples;
    named by its shape, so the judgement sits below the datasets' loaders)."""

    @property
    def labels(self) -> np.ndarray | None: ...
    @property
    def boxes(self) -> Sequence[_Boxes] | None: ...


def save_outputs(path: Path, outputs: list[dict[str, np.ndarray]], samples: Labelled,
                 states: Collection[str] = ()) -> None:
    """Every call's outputs, one row per call (sample or step): an output with a batch
    axis concatenated along it, a state output (`states`, which has none) stacked."""
    import numpy as np

    names = list(outputs[0])
    arrays = {f"output:{n}": (np.stack if n in states else np.concatenate)(
        [o[n] for o in outputs]) for n in names}
    if samples.labels is not None:
        arrays["labels"] = np.asarray(samples.labels)
    if samples.boxes is not None:  # ragged: all boxes in one array, and a count per sample
        arrays["truth:boxes"] = np.concatenate([b.boxes for b in samples.boxes]
                                               ).reshape(-1, 4).astype(np.float64)
        arrays["truth:classes"] = np.concatenate([b.classes for b in samples.boxes]
                                                 ).astype(np.int64)
        arrays["truth:counts"] = np.array([len(b.classes) for b in samples.boxes],
                                          dtype=np.int64)
    np.savez(path, **arrays)  # type: ignore[arg-type]


def read_output(path: Path, output: str | None) -> tuple[np.ndarray, np.ndarray | None, str]:
    """One output of a stored outputs file, as stored (samples × the output's axes), the
    labels, and the output's name (the first output's, without `output`)."""
    import numpy as np

    with np.load(path) as archive:
        stored = [k.removeprefix("output:") for k in archive.files if k.startswith("output:")]
        name = output if output is not None else stored[0]
        if name not in stored:
            raise ValueError(f"the model produced no output '{name}' (it has {stored})")
        values = archive[f"output:{name}"]
        labels = archive["labels"] if "labels" in archive.files else None
        return values.astype(np.float64), labels, name
