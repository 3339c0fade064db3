"""How an OpenVINO model's inputs are shaped before it is saved as IR (`shapes`,
`input_shapes`, and the recipe's shape profiles).

The compile stage (backend.py) and `openvino-quantize` (quantize.py) both call
`shape_model`, so the IR NNCF calibrates is the IR the target builds.
"""

from __future__ import annotations

from typing import Any

from edgebuild.backends.openvino.options import OpenVinoOptions, Shapes
from edgebuild.core.op import IoSpec
from edgebuild.core.shapes import axis_names, bounds, io_profiles
from edgebuild.errors import StageError


def shape_model(ov: Any, model: Any, options: OpenVinoOptions, io: IoSpec) -> dict[str, str]:
    """Apply `shapes`/`input_shapes`; returns each input's shape as written in the IR.

    A dynamic dimension of a static IR takes the recipe's declared example shape (the
    shape the model was exported, calibrated and is measured at), never 1: an image
    model fixed at 1×1 pixels compiles, and then no real input fits it. With
    `shapes: dynamic` and shape profiles, each dynamic axis a profile binds is bounded
    by the profiles' smallest and largest size (`_bounded`). `openvino-quantize` shapes
    its model the same way before NNCF calibrates it, so the IR it calibrates is the
    IR this target builds.
    """
    names = [i.get_any_name() for i in model.inputs]
    unknown = sorted(set(options.input_shapes) - set(names))
    if unknown:
        raise StageError(f"openvino option input_shapes names {unknown}, which are not "
                         f"model inputs", f"model inputs: {', '.join(names)}")
    declared = {str(t["name"]): list(t["shape"]) for t in io.inputs}
    new: dict[str, Any] = {}
    if options.shapes is Shapes.STATIC:
        for port, name in zip(model.inputs, names, strict=True):
            current = port.get_partial_shape()
            if name in options.input_shapes:
                wanted = options.input_shapes[name]
                if current.rank.is_static and current.rank.get_length() != len(wanted):
                    raise StageError(f"input_shapes.{name} has rank {len(wanted)}, the model's "
                                     f"input is {current}", "give one size per dimension")
                new[name] = ov.PartialShape(wanted)
            elif current.is_dynamic:
                example = declared.get(name)
                if example is None or (current.rank.is_static
                                       and current.rank.get_length() != len(example)):
                    raise StageError(
                        f"input '{name}' is {current}: a static IR needs its shape, and the "
                        "recipe declares " + (f"{example}" if example else "no such input"),
                        f"set options.input_shapes.{name}, or `shapes: dynamic`")
                for dim, size in zip(current, example, strict=True):
                    if dim.is_static and dim.get_length() != size:
                        raise StageError(f"input '{name}' is {current}, the recipe declares "
                                         f"{example}", "make the recipe's `inputs:` shape "
                                         "match the model")
                new[name] = ov.PartialShape(example)
    elif io.shapes:
        new = _bounded(ov, model, names, io)
    if new:
        model.reshape(new)
    return {name: str(port.get_partial_shape()) for port, name in zip(model.inputs, names,
                                                                      strict=True)}


def _bounded(ov: Any, model: Any, names: list[str], io: IoSpec) -> dict[str, Any]:
    """Input name -> PartialShape whose profile-bound dynamic dims are Dimension(min, max).

        profiles  small: {height: 16}  large: {height: 64}
        IR input  [1, 3, ?, ?]  ──▶  [1, 3, 16..64, ?]   (width bound by no profile)

    A bounded dimension lets the CPU plugin plan its memory for the largest shape;
    a size outside the bounds is refused (the runner names the bounds). Dynamic
    axes no profile binds (a batch axis) stay unbounded.
    """
    ranges = bounds(io_profiles(io))
    bound = {name for sizes in io.shapes.values() for name in sizes}
    axes = {where for name, found in axis_names(io.inputs).items() if name in bound
            for where in found}
    new: dict[str, Any] = {}
    for port, name in zip(model.inputs, names, strict=True):
        current = port.get_partial_shape()
        if name not in ranges or current.rank.is_dynamic or current.is_static:
            continue
        low, high = ranges[name]
        if current.rank.get_length() != len(low):
            raise StageError(f"input '{name}' is {current}, the recipe's shape profiles give "
                             f"it rank {len(low)}", "make the recipe's `inputs:` shape match "
                             "the model")
        dims = [ov.Dimension(low[i], high[i]) if dim.is_dynamic and (name, i) in axes else dim
                for i, dim in enumerate(current)]
        if any(d.is_dynamic != c.is_dynamic or str(d) != str(c)
               for d, c in zip(dims, current, strict=True)):
            new[name] = ov.PartialShape(dims)
    return new
