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

from edgebuild.errors import StageError

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
    """Whether a model input of `declared` dims takes `shape` as it is.

    A dim is an int (fixed; negative: dynamic), a bounded range in OpenVINO's
    notation, "16..64" (a dynamic IR bounded by the profiles: sizes within it), or
    any other string (dynamic, any size).
    """
    return len(declared) == len(shape) and all(
        _takes(d, s) for d, s in zip(declared, shape, strict=True))


def _takes(dim: int | str, size: int) -> bool:
    if isinstance(dim, int):
        return dim < 0 or dim == size
    low, dots, high = dim.partition("..")
    if not dots:
        return True
    return (not low.isdigit() or int(low) <= size) and (not high.isdigit() or size <= int(high))


def calibration_profile(stage: str, dataset: str, found: Mapping[str, list[int]], io: Any,
                        built: Mapping[str, list[int]] | None = None) -> str | None:
    """The profile whose shapes a calibration dataset's samples (`found`: input -> shape
    of one sample) have; StageError naming the dataset and the profiles when none.

    Calibration statistics (activation ranges) are taken at the shapes the data
    has, and a model with dynamic axes takes any: without this check a dataset at
    another size calibrates a model that is then built and timed at sizes it never
    saw. `built` is the shape a static artifact is fixed at, which the data must
    have exactly (it is the only shape the artifact runs at); otherwise, with
    `shapes:` declared, the data must match one profile. Without either, anything
    goes (None): the declared example shape is then no promise about the data.
    """
    def agrees(shapes: Mapping[str, list[int]]) -> bool:
        return all(list(found[n]) == list(s) for n, s in shapes.items() if n in found)

    shown = ", ".join(f"{n} {list(s)}" for n, s in found.items())
    if built is not None:
        if not agrees(built):
            raise StageError(
                f"{stage}: calibration dataset '{dataset}' has samples of {shown}, but this "
                f"target's static IR is built at "
                f"{', '.join(f'{n} {list(s)}' for n, s in built.items())}: calibration "
                "happens on the IR at the shape it is built at",
                f"give '{dataset}' samples at the built shape (the recipe's `inputs:` shape, "
                "or options.input_shapes), or build this target with `shapes: dynamic` "
                "(docs/recipes.md#shape-profiles)")
        matching = [name for name, shapes in io_profiles(io).items() if agrees(shapes)]
        return matching[0] if matching else None
    if not io.shapes:
        return None
    profiles = io_profiles(io)
    for name, shapes in profiles.items():
        if agrees(shapes):
            return name
    listed = "; ".join(f"{name}: " + ", ".join(f"{n} {s}" for n, s in shapes.items())
                       for name, shapes in profiles.items())
    raise StageError(
        f"{stage}: calibration dataset '{dataset}' has samples of {shown}, which is none of "
        f"the recipe's shape profiles ({listed})",
        "calibrate on a dataset at one of the profiles' sizes (a dataset at another size "
        "calibrates a model never built or timed at it), or add its size to `shapes:` "
        "(docs/recipes.md#shape-profiles)")


def sample_shapes(samples: Any) -> dict[str, list[int]]:
    """Input name -> the shape of one sample of a loaded dataset (batch kept)."""
    return {name: list(array.shape) for name, array in samples.feed(0).items()} \
        if len(samples) else {}


def io_profiles(io: Any) -> dict[str, Shapes]:
    """The resolved profiles of a stage's `IoSpec` (edgebuild.core.op)."""
    return resolve(io.inputs, io.shapes)
