"""Evaluate a dataset as the model is deployed: step by step, each step's state output
fed back as the next step's state input (the recipe's `state:`, a dataset's `stream:`;
the schema is edgebuild/recipe/stream.py).

    sample (a recording) ── cut along `axis` ──▶ window 0, window 1, …   (hop new values each)
    initial state ──▶ step(window 0, state) ──▶ outputs 0, state 1
                      step(window 1, state 1) ──▶ outputs 1, state 2 …

`infer` is whatever runs one step: the FP32 reference, or a build's runner. Each
carries the state *it* returned, so an INT8 build is judged on the state it computes,
never FP32's. Without a `stream:` every sample is one call, as always.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from edgebuild.core.samples import Samples, Steps
from edgebuild.errors import DataError

if TYPE_CHECKING:
    from edgebuild.recipe.stream import StreamSteps

Infer = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


def declared_steps(spec: StreamSteps, dataset_input: str | None,
                   tensors: list[dict[str, Any]], name: str, samples: Samples) -> Steps:
    """`spec` for dataset `name`, its window read from the input's declared shape (the
    recipe loader checked the axis and hop against it)."""
    cut = spec.input or dataset_input or tensors[0]["name"]
    declared = {t["name"]: t for t in tensors}
    if cut not in declared:
        raise DataError(f"dataset '{name}' is cut into steps along input '{cut}', which "
                        "this build does not take", f"model inputs: {', '.join(declared)}")
    if samples.labels is not None:
        raise DataError(f"dataset '{name}' is a stream and gives labels: one per sample, "
                        "while a stream is compared step by step",
                        "drop the labels: the gates compare each step with FP32's")
    shape = list(declared[cut]["shape"])
    return Steps(name, cut, spec.axis, int(shape[spec.axis]), spec.hop, spec.reset)


def first_feeds(samples: Samples) -> dict[str, np.ndarray]:
    """The inputs of the first call, which a runner is resized to: the first sample's,
    or with a stream its first step's."""
    steps = samples.steps
    if steps is None:
        return samples.feed(0)
    whole = samples.sequence(0)
    return {**whole, steps.input: next(steps.windows(whole[steps.input]))}


def evaluate(samples: Samples, state: list[dict[str, Any]], infer: Infer
             ) -> list[dict[str, np.ndarray]]:
    """Every call's outputs, in order: one per sample, or with a stream one per step of
    every sample, `state` (the io's pairs) carried from each step to the next."""
    steps = samples.steps
    if steps is None:
        return [infer(samples.feed(i)) for i in range(len(samples))]
    outputs: list[dict[str, np.ndarray]] = []
    carried: dict[str, np.ndarray] = {}
    for index in range(len(samples)):
        whole = samples.sequence(index)
        if index == 0 or steps.reset == "sample":
            carried = {p["input"]: whole[p["input"]] for p in state}
        for window in steps.windows(whole[steps.input]):
            found = infer({**whole, steps.input: window, **carried})
            for pair in state:
                carried[pair["input"]] = next_state(found, pair, carried[pair["input"]])
            outputs.append(found)
    return outputs


BATCH = 32  # samples per call where the model takes a batch axis (evaluate_batched)


def evaluate_batched(samples: Samples, infer: Infer, batch_axis: bool
                     ) -> list[dict[str, np.ndarray]]:
    """`evaluate`'s rows (one per sample), computed BATCH samples a call where the model
    takes them: every input declares axis 0 dynamic (`batch_axis`), the dataset is not a
    stream and feeds no input without a sample axis. A 10,000-image reference takes
    seconds instead of a minute of per-call overhead.

    Checked on the first batch, never assumed: each output must come back with the
    batch's rows ([1, …] alone, [n, …] batched) and its first row must equal the sample's
    own result (a model that mixes the rows of a batch, or whose output has no sample
    axis, such as a detector's list of boxes, is evaluated one sample a call)."""
    count = len(samples)
    if not batch_axis or samples.steps is not None or samples.unbatched or count < 2:
        return evaluate(samples, [], infer)
    alone = infer(samples.feed(0))
    size = min(BATCH, count)
    try:  # a model that declares a dynamic axis 0 but cannot take a batch says so here
        first = infer({k: v[:size] for k, v in samples.inputs.items()})
    except Exception:
        first = {}
    if not _rows_of(alone, first, size):
        return [alone, *(infer(samples.feed(i)) for i in range(1, count))]
    outputs = _split(first, size)
    for start in range(size, count, BATCH):
        stop = min(start + BATCH, count)
        found = infer({k: v[start:stop] for k, v in samples.inputs.items()})
        if not all(np.asarray(v).shape[:1] == (stop - start,) for v in found.values()):
            found_rows = [infer(samples.feed(i)) for i in range(start, stop)]
        else:
            found_rows = _split(found, stop - start)
        outputs.extend(found_rows)
    return outputs


def _rows_of(alone: dict[str, np.ndarray], batched: dict[str, np.ndarray], size: int) -> bool:
    """Whether `batched` holds `size` rows of what `alone` (one sample) holds, its first
    row equal to `alone` (within float32's rounding of a different summation order)."""
    if alone.keys() != batched.keys():
        return False
    for name, one in alone.items():
        one, many = np.asarray(one), np.asarray(batched[name])
        if one.ndim == 0 or one.shape[0] != 1 or many.shape != (size, *one.shape[1:]):
            return False
        if np.issubdtype(one.dtype, np.floating):
            if not np.allclose(many[:1], one, rtol=1e-4, atol=1e-5, equal_nan=True):
                return False
        elif not np.array_equal(many[:1], one):
            return False
    return True


def _split(found: dict[str, np.ndarray], size: int) -> list[dict[str, np.ndarray]]:
    return [{k: np.asarray(v)[i:i + 1] for k, v in found.items()} for i in range(size)]


def next_state(found: dict[str, np.ndarray], pair: dict[str, Any],
                before: np.ndarray) -> np.ndarray:
    """The state output as the next step's state input: its shape, in its dtype."""
    name, into = pair["output"], pair["input"]
    if name not in found:
        raise DataError(f"the model returned no output '{name}', paired with state input "
                        f"'{into}' (`state:`); it returned {', '.join(found)}")
    value = np.asarray(found[name])
    if value.shape != before.shape:
        raise DataError(f"state output '{name}' has shape {list(value.shape)}, and state "
                        f"input '{into}' takes {list(before.shape)}",
                        "pair each state input with the output that returns it "
                        "(`state: [{input, output}]`)")
    return value.astype(before.dtype, copy=False)


def stream_summary(samples: Samples, outputs: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """What an evaluation stage reports about what it ran: the samples, and with a
    stream the steps and how they were cut."""
    steps = samples.steps
    if steps is None:
        return {"samples": len(outputs)}
    return {"samples": len(outputs), "steps": len(outputs), "sequences": len(samples),
            "stream": {"input": steps.input, "axis": steps.axis, "window": steps.window,
                       "hop": steps.hop, "reset": steps.reset}}
