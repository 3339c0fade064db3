"""A recipe's `inputs:` checked against its ONNX source, at validate and plan time.

Without this a recipe that declares `sr` as `[1]` for a file whose `sr` is a
scalar validated and planned, and failed at the latency stage with a hint about
`shapes:` the recipe did not have. Here every declared input must be a graph input
of the file with its rank and dtype, and a dimension the file fixes must be
declared at that size (a dimension the file leaves dynamic takes any size); every
graph input the recipe leaves out is a problem too (nothing would feed it). Each
problem is at the input's line and names the file's own inputs.

A file that is missing or that this reader cannot parse is left to the stages
that load it (they name the file and the loader's own error).
"""

from __future__ import annotations

from pathlib import Path

from edgebuild.core.onnx_io import OnnxReadError, OnnxSignature, OnnxTensor, read_signature
from edgebuild.errors import EdgebuildError, did_you_mean
from edgebuild.recipe.files import resolve_file
from edgebuild.recipe.inputs import TensorSpec
from edgebuild.recipe.models import Recipe

Report = list[tuple[tuple[str, ...], str, str]]  # (key path, message, hint)


def check_onnx_inputs(recipe: Recipe, base_dir: Path) -> Report:
    """Problems with the recipe's inputs against its ONNX file (none for a PyTorch
    source, or one whose pre/post-processing changes the inputs)."""
    ref = recipe.model.onnx
    if ref is None or getattr(recipe.model, "prepost", None) is not None:
        return []
    try:
        path = resolve_file(ref, base_dir)
    except EdgebuildError:
        return []  # a package not installed: reported where the file is read
    if not path.is_file():
        return []  # nor is a missing file this check's to report (plan and run do)
    try:
        signature = read_signature(path)
    except (OnnxReadError, OSError):
        return []  # not a model this reader parses: the stage that loads it says why
    return _compare(recipe.inputs, signature, path.name) + _class_gates(recipe, signature,
                                                                       path.name)


def _class_gates(recipe: Recipe, signature: OnnxSignature, file: str) -> Report:
    """A classification gate on an output with positions and classes (`[1, T, C]`) and
    no `class_axis`: one argmax over both would mean nothing (docs/gates.md)."""
    from edgebuild.recipe.accuracy import AccuracyTask

    # The recipe's `outputs:` name the file's outputs in order (they may rename them).
    outputs = {t.name: t for t in signature.outputs}
    outputs.update(zip(recipe.outputs, signature.outputs, strict=False))
    first = signature.outputs[0] if signature.outputs else None
    found: Report = []
    for name, target in recipe.targets.items():
        for index, gate in enumerate(target.gates.accuracy_gates):
            if gate.task is not AccuracyTask.CLASSIFICATION or gate.class_axis is not None:
                continue
            tensor = outputs.get(gate.output) if gate.output else first
            if tensor is None or tensor.dims is None:
                continue
            wide = [d for d in tensor.dims[1:] if d != 1]
            if len(wide) < 2:
                continue
            where: tuple[str, ...] = ("targets", name, "gates", "accuracy")
            if isinstance(target.gates.accuracy, list):
                where = (*where, str(index))
            found.append((where, f"a classification gate on output '{tensor.name}', which "
                          f"{file} declares as {tensor.describe().split(' ', 2)[2]}: one "
                          "argmax over it mixes positions and classes",
                          "declare the class axis (`class_axis: -1` for [1, T, C]) for "
                          "per-position agreement, or `task: ctc` for a CTC head "
                          "(docs/gates.md#sequence-outputs)"))
    return found


def _compare(declared: list[TensorSpec], signature: OnnxSignature, file: str) -> Report:
    found: Report = []
    actual = {t.name: t for t in signature.inputs}
    listing = "; ".join(t.describe() for t in signature.inputs) or "none"
    for index, spec in enumerate(declared):
        here = ("inputs", str(index))
        tensor = actual.get(spec.name)
        if tensor is None:
            guess = did_you_mean(spec.name, list(actual))
            found.append(((*here, "name"), f"{file} has no input '{spec.name}'",
                          (f"{guess}; " if guess else "") + f"its inputs: {listing}"))
            continue
        found.extend(_one(spec, tensor, here, file))
    names = {s.name for s in declared}
    for tensor in signature.inputs:
        if tensor.name not in names:
            found.append((("inputs",), f"{file} has input '{tensor.name}' "
                          f"({tensor.describe().split(' ', 1)[1]}), which `inputs:` leaves "
                          "out: nothing would feed it",
                          f"declare it: `- {_yaml(tensor)}` (with `value:` when a dataset "
                          "does not give it: a sample rate, a state's first step)"))
    return found


def _one(spec: TensorSpec, tensor: OnnxTensor, here: tuple[str, ...], file: str) -> Report:
    found: Report = []
    own = f"{file} declares it as {tensor.describe()}"
    if tensor.dtype != spec.dtype:
        found.append(((*here, "dtype"), f"input '{spec.name}' is {spec.dtype} in the recipe; "
                      f"{own}", f"write `dtype: {tensor.dtype}`"))
    dims = tensor.dims
    if dims is None:
        return found
    if len(dims) != len(spec.shape):
        found.append(((*here, "shape"), f"input '{spec.name}' has {len(spec.shape)} "
                      f"dimension{'s' if len(spec.shape) != 1 else ''} in the recipe "
                      f"{spec.shape}; {own}",
                      "it is a scalar: write `shape: []`" if not dims else
                      f"declare {len(dims)} dimension{'s' if len(dims) != 1 else ''}, "
                      f"e.g. `shape: {_example(dims)}`"))
        return found
    for axis, (dim, size) in enumerate(zip(dims, spec.shape, strict=True)):
        if not isinstance(dim, int):
            continue
        if size != dim:
            found.append(((*here, "shape"), f"input '{spec.name}' axis {axis} is {size} in "
                          f"the recipe; {own}, fixed at {dim}",
                          f"write `shape: {_example(dims, spec.shape)}`"))
        elif axis in spec.dynamic_axes:
            found.append(((*here, "dynamic_axes", str(axis)), f"input '{spec.name}' axis "
                          f"{axis} is declared dynamic ('{spec.dynamic_axes[axis]}'); {own}, "
                          f"fixed at {dim}", f"remove axis {axis} from `dynamic_axes`: no "
                          "shape profile can change it"))
    return found


def _example(dims: tuple[int | str, ...], declared: list[int] | None = None) -> list[int]:
    """A shape the file takes: its fixed sizes, and the recipe's (or 1) elsewhere."""
    return [d if isinstance(d, int) else (declared[i] if declared else 1)
            for i, d in enumerate(dims)]


def _yaml(tensor: OnnxTensor) -> str:
    shape = "any" if tensor.dims is None else str(_example(tensor.dims))
    return f"{{name: {tensor.name}, shape: {shape}, dtype: {tensor.dtype}}}"
