"""Shape profiles: the input shapes a target is built and measured at.

A recipe declares each input's example shape and names its dynamic axes
(`dynamic_axes: {1: sequence}`); its optional `shapes:` binds those names to
sizes, one profile per entry::

    inputs:  input_ids [1, 32] {1: sequence}, attention_mask [1, 32] {1: sequence}
    shapes:  short: {sequence: 16}            long: {sequence: 128}
    ───────▶ {short: {input_ids: [1, 16], attention_mask: [1, 16]},
              long:  {input_ids: [1, 128], attention_mask: [1, 128]}}

A name is shared by every input that uses it; a dynamic axis a profile leaves
unbound keeps its example size. Without `shapes:` there is one profile,
`example`, of the declared shapes. `resolve` is the one place that turns the
declarations into shapes: the latency stage, the runners and the backends that
fix or bound dimensions (OpenVINO, TensorRT) read it, never `shape` directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

EXAMPLE = "example"  # the one profile of a recipe without `shapes:`

Shapes = dict[str, list[int]]  # input name -> shape


def axis_names(inputs: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[str, int]]]:
    """Symbolic axis name -> every (input, axis index) that carries it."""
    found: dict[str, list[tuple[str, int]]] = {}
    for tensor in inputs:
        for axis, name in tensor.get("dynamic_axes", {}).items():
            found.setdefault(str(name), []).append((str(tensor["name"]), int(axis)))
    return found


def resolve(inputs: Sequence[Mapping[str, Any]],
            profiles: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Shapes]:
    """Profile name -> input name -> shape, in the recipe's order.

    `inputs` are the recipe's declarations (name, shape, dynamic_axes), `profiles`
    its `shapes:`. The recipe loader has checked the names and sizes; an unknown
    name here is a programming error.
    """
    if not profiles:
        return {EXAMPLE: {str(t["name"]): list(t["shape"]) for t in inputs}}
    names = axis_names(inputs)
    resolved: dict[str, Shapes] = {}
    for profile, sizes in profiles.items():
        unknown = sorted(set(sizes) - set(names))
        if unknown:
            raise ValueError(f"shape profile '{profile}' binds {unknown}, which no input's "
                             "dynamic_axes names")
        shapes = {str(t["name"]): list(t["shape"]) for t in inputs}
        for name, size in sizes.items():
            for tensor, axis in names[name]:
                shapes[tensor][axis] = int(size)
        resolved[str(profile)] = shapes
    return resolved


def bounds(profiles: Mapping[str, Shapes]) -> dict[str, tuple[list[int], list[int]]]:
    """Input name -> (smallest, largest) size of every axis over the profiles."""
    found: dict[str, tuple[list[int], list[int]]] = {}
    for shapes in profiles.values():
        for name, shape in shapes.items():
            if name not in found:
                found[name] = (list(shape), list(shape))
                continue
            low, high = found[name]
            found[name] = ([min(a, b) for a, b in zip(low, shape, strict=True)],
                           [max(a, b) for a, b in zip(high, shape, strict=True)])
    return found


def fits(declared: tuple[int | str, ...] | list[int | str], shape: list[int]) -> bool:
    """Whether a model input of `declared` dims (ints fixed, anything else dynamic)
    takes `shape` as it is."""
    return len(declared) == len(shape) and all(
        not isinstance(d, int) or d < 0 or d == s for d, s in zip(declared, shape, strict=True))


def io_profiles(io: Any) -> dict[str, Shapes]:
    """The resolved profiles of a stage's `IoSpec` (edgebuild.core.op)."""
    return resolve(io.inputs, io.shapes)
