"""PyTorch -> Core ML mlprogram (.mlpackage) with coremltools, then weight compression.

coremltools is imported only here and only when a stage runs: `import coremltools`
takes seconds and pulls in torch, and it probes every optional framework it can convert
from by importing it (see `UNUSED_FRAMEWORKS`).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.errors import BackendUnavailable, StageError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from edgebuild.backends.coreml.options import CoreMlOptions


# What coremltools imports at its own import to learn which converters it may offer
# (coremltools/_deps/__init__.py, 9.0): TensorFlow, scikit-learn, ExecuTorch's exir (its
# edge dialect's YAML alone is seconds), XGBoost, libsvm. edgebuild converts from PyTorch
# only, so a process that has not imported them yet does not for coremltools: 7 s of a
# 10 s import (AVX2 EPYC), paid by every Core ML stage. A process that already has one
# (ExecuTorch's Core ML partitioner) keeps it.
UNUSED_FRAMEWORKS = ("tensorflow", "sklearn", "executorch", "xgboost", "libsvm")


@contextmanager
def _unused_frameworks_hidden() -> Iterator[None]:
    hidden = [name for name in UNUSED_FRAMEWORKS if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


@contextmanager
def quiet_coremltools() -> Iterator[Any]:
    """coremltools, imported with its version warnings and progress bars silenced (they
    say torch/TensorFlow/scikit-learn are newer than it was tested with, on every
    import; the conversion's own result is checked instead)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("coremltools").setLevel(logging.ERROR)
        try:
            with _unused_frameworks_hidden():
                import coremltools as ct
        except ImportError:
            raise BackendUnavailable("coreml", "coremltools is not installed",
                                     "coreml") from None
        yield ct


def convert(captured: Any, tensors: list[dict[str, Any]], outputs: list[str],
            options: CoreMlOptions, profiles: dict[str, dict[str, list[int]]] | None = None
            ) -> Any:
    """The captured model as an mlprogram MLModel, named like the recipe's I/O.
    `profiles` (the target's shape profiles, when the recipe declares `shapes:`) are the
    shapes a TorchScript capture's dynamic inputs are converted for."""
    with quiet_coremltools() as ct:
        import numpy as np
        import torch

        kwargs: dict[str, Any] = {
            "convert_to": "mlprogram",
            "minimum_deployment_target": getattr(ct.target, options.minimum_deployment_target),
            "compute_precision": ct.precision.FLOAT16 if options.compute_precision == "fp16"
            else ct.precision.FLOAT32,
            "compute_units": getattr(ct.ComputeUnit, options.compute_units.upper()),
        }
        exported = isinstance(captured, torch.export.ExportedProgram)
        # float32 I/O whatever the compute precision (an iOS16+ fp16 program would
        # otherwise take fp16 inputs). TorchScript carries no shapes: give them; an
        # ExportedProgram has them, dynamic dimensions included, from torch.export.
        kwargs["inputs"] = [
            ct.TensorType(name=t["name"], dtype=_io_dtype(t["dtype"])) if exported
            else ct.TensorType(name=t["name"], shape=_shape(ct, t, options, profiles or {}),
                               dtype=_io_dtype(t["dtype"]))
            for t in tensors]
        kwargs["outputs"] = [ct.TensorType(name=n, dtype=np.float32) for n in outputs]
        try:
            model = ct.convert(captured, **kwargs)
        except Exception as exc:  # coremltools raises whatever its op converter hits
            others = [c for c in ("trace", "export", "script") if c != options.capture.value]
            raise StageError(f"coremltools could not convert the model captured with "
                             f"`capture: {options.capture.value}`: "
                             f"{type(exc).__name__}: {_first_line(exc)}",
                             "another capture often converts where one fails: set the "
                             f"target's `options: {{capture: {others[0]}}}` (or {others[1]}); "
                             "e.g. an LSTM `export` cannot convert converts traced") from None
        return _renamed(ct, model, [t["name"] for t in tensors], outputs)


def _io_dtype(name: str) -> Any:
    """Core ML I/O types are float32/float16/int32: floats as float32, ints as int32."""
    import numpy as np

    return np.float32 if name.startswith("float") else np.int32


def _shape(ct: Any, tensor: dict[str, Any], options: CoreMlOptions,
           profiles: dict[str, dict[str, list[int]]]) -> Any:
    """A fixed shape, or a flexible one where the recipe declares dynamic axes: the
    option's enumerated shapes, else the target's shape profiles (one: fixed; several:
    enumerated, which the Neural Engine prefers to ranges), else a range."""
    axes = {int(a) for a in tensor.get("dynamic_axes") or {}}
    if not axes:
        return tuple(tensor["shape"])
    if options.enumerated_shapes:
        shapes = options.enumerated_shapes.get(tensor["name"])
        if shapes:
            return ct.EnumeratedShapes(shapes=[tuple(s) for s in shapes],
                                       default=tuple(tensor["shape"]))
    if profiles:
        distinct = list(dict.fromkeys(tuple(p[tensor["name"]]) for p in profiles.values()))
        if len(distinct) == 1:
            return distinct[0]
        return ct.EnumeratedShapes(shapes=distinct, default=distinct[0])
    if options.shape_range_max is None:
        raise StageError(
            f"input '{tensor['name']}' has dynamic axes {sorted(axes)}: a TorchScript "
            "capture converts to an mlprogram only with bounded shapes",
            "declare the sizes it takes in the recipe's `shapes:`, set the target option "
            "`shape_range_max` (upper bound of each dynamic axis) or `enumerated_shapes`, or "
            "use `capture: export`")
    upper = options.shape_range_max
    return ct.Shape([ct.RangeDim(lower_bound=1, upper_bound=upper, default=d)
                     if i in axes else d for i, d in enumerate(tensor["shape"])])


def _renamed(ct: Any, model: Any, inputs: list[str], outputs: list[str]) -> Any:
    """`model` with its features named as in the recipe (an ExportedProgram names them
    after forward()'s arguments and internal values)."""
    spec = model.get_spec()
    current_in = [f.name for f in spec.description.input]
    current_out = [f.name for f in spec.description.output]
    if len(current_out) != len(outputs):
        raise StageError(f"the Core ML model has {len(current_out)} outputs, the recipe "
                         f"names {len(outputs)}: {outputs}")
    pairs = [*zip(current_in, inputs, strict=True), *zip(current_out, outputs, strict=True)]
    if all(old == new for old, new in pairs):
        return model
    for old, new in pairs:
        if old != new:
            ct.utils.rename_feature(spec, old, new)
    return ct.models.MLModel(spec, weights_dir=model.weights_dir, skip_model_load=True)


def compress(model: Any, options: CoreMlOptions, keep_float: list[str] | None = None) -> Any:
    """`model` with its weights compressed as `options.weights` says (or as is), but for
    the weight consts `keep_float` names (Core ML const names: `float_weight_consts`)."""
    if options.weights == "none":
        return model
    with quiet_coremltools():
        from coremltools.optimize import coreml as cto

        skip: dict[str, Any] = dict.fromkeys(keep_float or [])
        if options.weights == "int8":
            config = cto.OpLinearQuantizerConfig(
                mode=options.int8_mode, dtype="int8", granularity=options.granularity,
                block_size=options.block_size, weight_threshold=options.weight_threshold)
            return cto.linear_quantize_weights(
                model, cto.OptimizationConfig(global_config=config, op_name_configs=skip))
        try:
            import sklearn  # noqa: F401 - coremltools' k-means needs it
        except ImportError:
            raise BackendUnavailable("coreml", "palettization needs scikit-learn",
                                     "coreml") from None
        config = cto.OpPalettizerConfig(mode="kmeans", nbits=options.palettize_bits,
                                        weight_threshold=options.weight_threshold)
        return cto.palettize_weights(
            model, cto.OptimizationConfig(global_config=config, op_name_configs=skip))


WEIGHTED_OPS = ("conv", "conv_transpose", "linear")


def float_weight_consts(mlmodel: Any, torch_model: Any, tensors: list[dict[str, Any]],
                        modules: list[str]) -> list[str]:
    """The Core ML const names of the weights of the PyTorch `modules`.

    coremltools renames what it rewrites (a conv folded with its batch norm takes the
    norm's name, its weight a fresh const), so names cannot be matched; order can. The
    PyTorch conv / linear layers in the order a forward pass calls them are the
    program's conv / linear ops in program order, checked shape by shape."""
    if not modules:
        return []
    import torch

    from edgebuild.core.generated import sample_inputs

    calls: list[tuple[str, tuple[int, ...]]] = []
    hooks = [module.register_forward_hook(
        lambda m, _i, _o, name=name: calls.append((name, tuple(m.weight.shape))))
        for name, module in torch_model.named_modules()
        if isinstance(module, torch.nn.Conv1d | torch.nn.Conv2d | torch.nn.Conv3d
                      | torch.nn.ConvTranspose2d | torch.nn.Linear)]
    try:
        feed = sample_inputs(tensors, seed=0, count=1)[0]
        with torch.no_grad():
            torch_model(*[torch.from_numpy(feed[t["name"]]) for t in tensors])
    finally:
        for hook in hooks:
            hook.remove()
    ops = [op for op in mlmodel._mil_program.functions["main"].operations
           if op.op_type in WEIGHTED_OPS and op.weight.op.op_type == "const"]
    shapes = [tuple(op.weight.shape) for op in ops]
    if [shape for _, shape in calls] != shapes:
        raise StageError(
            "keep_float: the PyTorch conv / linear layers (in call order) do not line up "
            f"with the Core ML program's {len(shapes)} conv / linear weights",
            "name no layer in keep_float for this model (its weights are then all "
            "compressed), and report the model: the layer-to-op matching needs one op per "
            "layer call")
    wanted = set(modules)
    return [op.weight.op.name for (name, _), op in zip(calls, ops, strict=True)
            if name in wanted]


def save(model: Any, path: Path) -> None:
    with quiet_coremltools():
        model.save(str(path))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""
