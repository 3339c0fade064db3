"""PyTorch -> ExecuTorch program (.pte): export, (int8) quantize, lower, serialize.

    nn.Module ─ torch.export.export (static shapes)
              ─ [int8: export().module() ─ prepare_pt2e(XNNPACKQuantizer, ReLU6 fused:
                 pt2e.py) ─ calibrate ─ bias correction ─ convert_pt2e ─ torch.export.export]
              ─ to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()])
              ─ to_executorch() ─▶ model.pte

ExecuTorch, torchao and torch are imported only here and only when a stage runs
(`import executorch.exir` takes ~7 s). A failure at any step is a StageError that
names what failed (the model's source line for an export, the operator for a
lowering) and what to try.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from edgebuild.backends.executorch.options import Delegate, Precision
from edgebuild.errors import BackendUnavailable, PlanError, StageError, did_you_mean
from edgebuild.passes.torch_capture import export_failure, first_line, user_frame

if TYPE_CHECKING:
    from edgebuild.backends.executorch.options import ExecutorchOptions
    from edgebuild.core.samples import Samples


@contextmanager
def needs_executorch() -> Iterator[None]:
    """An ImportError of ExecuTorch (or its torchao) as BackendUnavailable with the extra."""
    try:
        yield
    except ImportError as exc:
        raise BackendUnavailable("executorch", f"{exc.name or exc} is not importable",
                                 "executorch") from None


def export(model: Any, inputs: tuple[Any, ...], step: str = "torch.export") -> Any:
    """`torch.export.export(model, inputs)` at the example shapes; a refusal becomes a
    StageError naming the model's line it stopped at."""
    import torch

    try:
        with torch.no_grad():
            return torch.export.export(model, inputs)
    except Exception as exc:  # export raises many types (UserError, GuardOn..., Unsupported)
        raise export_error(exc, step) from None


def export_error(exc: BaseException, step: str) -> StageError:
    return export_failure("ExecuTorch", exc, step)


def _first_line(text: str) -> str:
    return first_line(text)


def quantize(model: Any, inputs: tuple[Any, ...], options: ExecutorchOptions,
             calibration: Samples, names: list[str], count: int) -> tuple[Any, dict[str, Any]]:
    """(the PT2E int8 model (convert_pt2e's), what the recipe did: clamps fused, biases
    corrected), calibrated on `count` samples of `calibration`, fed in the order of the
    recipe's inputs `names`. pt2e.py holds the recipe."""
    import torch

    with needs_executorch():
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        from edgebuild.backends.executorch import pt2e

    keep = not_in(float_modules(model, options.keep_float)) if options.keep_float else None
    quantizer = pt2e.quantizer(options, keep)
    captured = export(model, inputs, "torch.export (for PT2E quantization)").module()
    feeds = [tuple(torch.from_numpy(calibration.feed(i)[name]) for name in names)
             for i in range(count)]
    done: dict[str, Any] = {}
    try:
        prepared = prepare_pt2e(captured, quantizer)
        done["clamps_fused"] = quantizer.clamps_fused
        with torch.no_grad():
            for feed in feeds:
                prepared(*feed)
        if options.bias_correction:
            shifts = pt2e.correct_biases(prepared, feeds)
            done["bias_corrected"] = {"layers": len(shifts),
                                      "largest_shift": max(shifts.values(), default=0.0)}
        return convert_pt2e(prepared), done
    except Exception as exc:
        raise StageError(f"ExecuTorch: PT2E int8 quantization failed ({type(exc).__name__}: "
                         f"{_first_line(str(exc))})",
                         "XNNPACKQuantizer annotates conv, linear, add, mul, pooling and "
                         "activations; try `precision: fp32`, or report the op named") from None


def float_modules(model: Any, names: list[str]) -> list[str]:
    """The PyTorch module names `names` mean (module names, or the ONNX node / output
    names torch.onnx gives their ops); a PlanError (exit 2) naming an unknown one."""
    from edgebuild.passes.torch_names import module_name

    modules = {name for name, _ in model.named_modules() if name}
    found = []
    for name in names:
        module = module_name(name)
        if module not in modules:
            raise PlanError(f"keep_float: '{name}' is not a module of this model",
                            did_you_mean(module, sorted(modules)) or "name a module as "
                            "PyTorch names it, or its ONNX node (/path/to/module/Conv)")
        found.append(module)
    return found


def not_in(modules: list[str]) -> Any:
    """XNNPACKQuantizer's filter: quantize a node unless one of `modules` made it (its
    `set_module_name` refuses a None config, so leaving a module float is a filter)."""
    from torchao.quantization.pt2e.quantizer import get_module_name_filter

    inside = [get_module_name_filter(m) for m in modules]
    return lambda node: not any(f(node) for f in inside)


def lower(program: Any, options: ExecutorchOptions) -> tuple[Any, Any]:
    """(the EdgeProgramManager after partitioning, the ExecutorchProgramManager)."""
    with needs_executorch():
        from executorch.exir import to_edge_transform_and_lower

        partitioners: list[Any] = []
        if options.delegate is Delegate.XNNPACK:
            from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
                XnnpackPartitioner,
            )
            partitioners = [XnnpackPartitioner()]
    try:
        edge = to_edge_transform_and_lower(program, partitioner=partitioners)
    except Exception as exc:
        raise lowering_error(exc, "to_edge_transform_and_lower") from None
    try:
        return edge, edge.to_executorch()
    except Exception as exc:
        raise lowering_error(exc, "to_executorch") from None


# How ExecuTorch names the operator it refused, and what to try for each.
_OP_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"Operator (?:torch\._ops\.)?([\w.:]+) is not in Core ATen opset",
     "it is not a Core ATen op, so no ExecuTorch kernel runs it: rewrite it with core ops "
     "(the PyTorch IR docs list them), or register a kernel and pass "
     "EdgeCompileConfig(_core_aten_ops_exception_list=[...])"),
    (r"Missing out variants: \{([^}]*)\}",
     "ExecuTorch runs an op through its `.out` variant: register one for this custom op "
     "(torch.library, with a kernel linked into the runtime), or keep it out of forward()"),
    (r"Operator: <EdgeOpOverload: ([\w.]+)>",
     "its inputs and outputs have dtypes ExecuTorch's kernels do not take (complex "
     "tensors from torch.fft / torch.stft, say): compute it in real arithmetic "
     "(a DFT as a matmul of cos/sin weights), or keep it out of the model"),
)


def lowering_error(exc: BaseException, step: str) -> StageError:
    text = str(exc)
    op, hint = "", ("see the stage log; `delegate: portable` tells a delegate problem from "
                    "an ExecuTorch one")
    for pattern, why in _OP_PATTERNS:
        match = re.search(pattern, text)
        if match:
            op, hint = match.group(1).replace("'", ""), why
            break
    where = user_frame(text)
    named = f" on {op}" if op else ""
    at = f" (model line {where})" if where else ""
    return StageError(f"ExecuTorch: {step} failed{named}{at}: {type(exc).__name__}: "
                      f"{_first_line(text)}", hint)


def build(model: Any, inputs: tuple[Any, ...], options: ExecutorchOptions,
          calibration: Samples | None, names: list[str]
          ) -> tuple[bytes, Any, dict[str, float], dict[str, Any]]:
    """(the .pte bytes, the partitioned edge program, the seconds of each step, what the
    int8 recipe did: {} for fp32)."""
    seconds: dict[str, float] = {}
    done: dict[str, Any] = {}
    started = time.perf_counter()
    with needs_executorch():
        import executorch.exir  # noqa: F401 - the import's own cost is not the export's
    seconds["import_seconds"] = time.perf_counter() - started
    started = time.perf_counter()
    if options.precision is Precision.INT8:
        assert calibration is not None  # the options' validator asks for it
        count = min(len(calibration), options.calibration_samples)
        model, done = quantize(model, inputs, options, calibration, names, count)
        seconds["quantize_seconds"] = time.perf_counter() - started
        started = time.perf_counter()
    program = export(model, inputs)
    seconds["export_seconds"] = time.perf_counter() - started
    started = time.perf_counter()
    edge, executorch_program = lower(program, options)
    seconds["lower_seconds"] = time.perf_counter() - started
    return (bytes(executorch_program.buffer), edge,
            {k: round(v, 2) for k, v in seconds.items()}, done)
