"""A recipe's streams checked at validate time, at the lines written: `state:` pairs
against the declared tensors, each dataset's `stream:` against the input it cuts, and
the gates on a state output against the state's shape.

The schema is stream.py (the recipe's models import it); these checks read the whole
`Recipe`, so they sit above it, as onnx_inputs.py does.
"""

from __future__ import annotations

import math

from edgebuild.errors import did_you_mean
from edgebuild.recipe.accuracy import AccuracyGate
from edgebuild.recipe.models import Recipe

Report = list[tuple[tuple[str, ...], str, str]]  # (key path, message, hint)


def check_stream(recipe: Recipe) -> Report:
    """`state:` pairs name declared tensors, once each; each `stream:` cuts a declared,
    batched input that is not a state along an axis it has, by at most its window;
    gates on a state output name axes and slices it has (axis 0 is the steps)."""
    found: Report = []
    inputs = {t.name: t for t in recipe.inputs}
    pairs = list(recipe.state)
    for index, pair in enumerate(pairs):
        here: tuple[str, ...] = ("state", str(index))
        value = inputs[pair.input].value if pair.input in inputs else None
        if pair.input not in inputs:
            found.append(((*here, "input"), f"no model input '{pair.input}'",
                          did_you_mean(pair.input, inputs) or f"inputs: {', '.join(inputs)}"))
        elif value is not None and float(value) != pair.initial_value:
            found.append(((*here, "initial"), f"input '{pair.input}' declares `value: "
                          f"{value}`, and its state starts at {pair.initial}",
                          "give the first step's state once: remove `value:` from the "
                          "input, `initial:` takes its place"))
        if pair.output not in recipe.outputs:
            found.append(((*here, "output"), f"no model output '{pair.output}'",
                          did_you_mean(pair.output, recipe.outputs)
                          or f"outputs: {', '.join(recipe.outputs)}"))
        for key in ("input", "output"):
            earlier = [i for i, p in enumerate(pairs[:index])
                       if getattr(p, key) == getattr(pair, key)]
            if earlier:
                found.append(((*here, key), f"{key} '{getattr(pair, key)}' is already "
                              f"paired by state.{earlier[0]}", "each state is one pair"))
    states = {p.input for p in pairs}
    for name, dataset in recipe.datasets.items():
        steps = dataset.stream
        if steps is None:
            continue
        here = ("datasets", name, "stream")
        cut = steps.input or dataset.input or recipe.inputs[0].name
        tensor = inputs.get(cut)
        if tensor is None:
            found.append(((*here, "input"), f"no model input '{cut}'",
                          did_you_mean(cut, inputs) or f"inputs: {', '.join(inputs)}"))
            continue
        if cut in states:
            found.append(((*here, "input"), f"'{cut}' is a state (`state:`): the steps "
                          "feed it, it is not cut into them", "name the input the sequence "
                          "runs along (the audio, the tokens)"))
        elif tensor.batch_axis is None:
            found.append(((*here, "input"), f"input '{cut}' has no sample axis "
                          "(`batch_axis: null`), so a dataset cannot give it as sequences",
                          "cut a batched input"))
        elif steps.axis >= len(tensor.shape):
            found.append(((*here, "axis"), f"input '{cut}' {tensor.shape} has no axis "
                          f"{steps.axis}", f"an axis from 1 to {len(tensor.shape) - 1}"))
        elif steps.hop > tensor.shape[steps.axis]:
            found.append(((*here, "hop"), f"hop {steps.hop} is longer than the window: "
                          f"input '{cut}' is {tensor.shape[steps.axis]} along axis "
                          f"{steps.axis}", "values between windows would never be fed"))
    return found + _gates_on_states(recipe)


def _gates_on_states(recipe: Recipe) -> Report:
    """A state output has no sample axis: a gate compares it one step (or sample) at a
    time, as rows `[steps, *state]`, so its axes count from 1 like any output's (axis 0
    is the steps): Silero's `[2, 1, 128]` state holds h and c along axis 1. A slice or a
    channel axis the state lacks, or an empty slice, is refused here, at its line."""
    found: Report = []
    inputs = {t.name: t for t in recipe.inputs}
    shapes = {p.output: inputs[p.input].shape for p in recipe.state if p.input in inputs}
    for target, entry in recipe.targets.items():
        gates = entry.gates
        listed = isinstance(gates.accuracy, list)
        for index, gate in enumerate(gates.accuracy_gates):
            if gate.output not in {p.output for p in recipe.state}:
                continue
            here = ("targets", target, "gates", "accuracy", *((str(index),) if listed else ()))
            if gate.task.value == "classification":
                found.append(((*here, "task"), f"'{gate.output}' is a state output "
                              "(`state:`), not class scores", "gate it with `task: "
                              "regression` (min_cosine, max_abs_error)"))
            shape = shapes.get(gate.output)
            if shape is not None:
                found += _state_axes(gate, list(shape), here)
    return found


def _state_axes(gate: AccuracyGate, shape: list[int], here: tuple[str, ...]) -> Report:
    """The slice and channel axis of a gate on a state shaped `shape`, in the gate's
    axes: 0 the steps, 1.. the state's own."""
    rank = len(shape) + 1
    state = f"[steps, {', '.join(map(str, shape))}]"
    hint = (f"a state output is compared one step a row, {state}: its own axes count from "
            f"1 (1 to {rank - 1}, or -1 to -{rank - 1})")
    found: Report = []
    axes = [("slice", gate.slice.axis)] if gate.slice is not None else []
    if isinstance(gate.channel_axis, int):
        axes.append(("channel_axis", gate.channel_axis))
    for key, axis in axes:
        resolved = axis if axis > 0 else rank + axis
        if not 1 <= resolved < rank:
            found.append(((*here, key), f"'{gate.output}' has no axis {axis}: to a gate it "
                          f"is {state}", hint))
            continue
        size = shape[resolved - 1]
        if key == "slice" and gate.slice is not None and not range(size)[
                gate.slice.start:gate.slice.stop]:
            found.append(((*here, key), f"slice {gate.slice.label} of '{gate.output}' "
                          f"{state} is empty: axis {axis} has {size} value(s)",
                          f"start and stop within 0..{size}"))
        if key == "channel_axis" and math.prod(shape) // max(size, 1) < 2:
            found.append(((*here, key), f"channel_axis {axis} of '{gate.output}' {state} "
                          "leaves one value per step in each channel: a cosine of one value "
                          "is only its sign", "slice the state into its parts instead "
                          "(`slice: {axis: …, start: …, stop: …}`, one gate a part)"))
    return found
