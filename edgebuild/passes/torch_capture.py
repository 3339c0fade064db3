"""Capture a PyTorch model as a graph, and prove the graph computes what eager PyTorch does.

Every step that consumes PyTorch (export-onnx, the Core ML backend) captures the
model one of three ways, chosen in the recipe:

- `trace` (torch.jit.trace) records the ops one example input runs: control flow
  that depends on the data is frozen into whichever branch that input took;
- `script` (torch.jit.script) compiles the Python source, keeping `if`/loops;
- `export` (torch.export) captures a full graph, and refuses data-dependent
  control flow (unless the model uses torch.cond) instead of freezing it.

A frozen branch is the dangerous case: the capture succeeds and is wrong for half
the inputs. So the captured graph is run beside the eager model on several inputs
(seeded random ones and their negations, which flip sign-dependent branches) and
the stage fails, naming the mode to use, when they differ.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from edgebuild.errors import StageError
from edgebuild.passes.torch_model import sample_inputs


class Capture(StrEnum):
    TRACE = "trace"
    SCRIPT = "script"
    EXPORT = "export"


WHY = {
    Capture.TRACE: "torch.jit.trace records the branch the example input took",
    Capture.SCRIPT: "torch.jit.script compiles the forward() source",
    Capture.EXPORT: "torch.export captures the whole graph",
}


def example_inputs(tensors: list[dict[str, Any]], dynamic_at_least: int = 0) -> tuple[
        Any, ...]:
    """Zeros of the declared shapes, each dynamic axis at least `dynamic_at_least`
    (torch.export treats sizes 0 and 1 as constants, so it wants 2; a conv net's
    spatial axes need their declared size, so that is kept when larger)."""
    import torch

    found = []
    for t in tensors:
        axes = {int(a) for a in t.get("dynamic_axes") or {}}
        shape = [max(d, dynamic_at_least) if i in axes else d for i, d in enumerate(t["shape"])]
        found.append(torch.zeros(shape, dtype=getattr(torch, t["dtype"])))
    return tuple(found)


def capture(model: Any, tensors: list[dict[str, Any]], mode: Capture) -> Any:
    """The captured model: a ScriptModule (trace, script) or an ExportedProgram with its
    decompositions run (export). Capture errors become a StageError naming the mode."""
    import torch

    try:
        with torch.no_grad():
            if mode is Capture.TRACE:
                return torch.jit.trace(  # type: ignore[no-untyped-call]
                    model, example_inputs(tensors), check_trace=False)
            if mode is Capture.SCRIPT:
                return torch.jit.script(model)
            dynamic = [{int(a): torch.export.Dim.DYNAMIC for a in t.get("dynamic_axes") or {}}
                       or None for t in tensors]
            shapes: Any = tuple(dynamic) if any(dynamic) else None
            if shapes is not None and _takes_varargs(model):
                shapes = (shapes,)  # forward(*inputs): all of them are its first argument
            program = torch.export.export(model, example_inputs(tensors, dynamic_at_least=2),
                                          dynamic_shapes=shapes)
            return program.run_decompositions({})
    except Exception as exc:  # each capture reports in its own exception types
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        others = ", ".join(f"`capture: {m.value}`" for m in Capture if m is not mode)
        hint = {
            Capture.EXPORT: "data-dependent control flow stops torch.export; "
                            f"try {others} (script keeps `if`/loops), or use torch.cond",
            Capture.SCRIPT: "torch.jit.script needs TorchScript-compatible Python; "
                            f"try {others}",
            Capture.TRACE: f"try {others}",
        }[mode]
        raise StageError(f"capture: {mode.value} failed ({type(exc).__name__}: {first})",
                         hint) from None


def _takes_varargs(model: Any) -> bool:
    import inspect

    parameters = inspect.signature(model.forward).parameters.values()
    return any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)


def run_captured(captured: Any, inputs: tuple[Any, ...]) -> list[Any]:
    """Outputs of a captured model as a list of tensors."""
    import torch

    module = captured.module() if isinstance(captured, torch.export.ExportedProgram) \
        else captured
    with torch.no_grad():
        result = module(*inputs)
    return [result] if isinstance(result, torch.Tensor) else list(result)


def check_capture(model: Any, captured: Any, tensors: list[dict[str, Any]], mode: Capture,
                  samples: int = 2, atol: float = 1e-4, rtol: float = 1e-3) -> dict[str, Any]:
    """Compare the captured graph with eager PyTorch on `samples` seeded random inputs
    and their negations; raise a StageError naming the capture mode to use."""
    import numpy as np
    import torch

    worst = 0.0
    feeds = sample_inputs(tensors, seed=1, count=samples)
    fixed = {t["name"] for t in tensors if t.get("value") is not None}  # declared: kept
    flipped = [{k: -v if v.dtype.kind == "f" and k not in fixed else v for k, v in f.items()}
               for f in feeds]
    for n, feed in enumerate(feeds + flipped):
        inputs = tuple(torch.from_numpy(v) for v in feed.values())
        with torch.no_grad():
            eager = model(*inputs)
        expected = [eager] if isinstance(eager, torch.Tensor) else list(eager)
        got = run_captured(captured, inputs)
        for ref, out in zip(expected, got, strict=False):
            a, b = ref.detach().float().numpy(), out.detach().float().numpy()
            if a.shape != b.shape:
                raise _differs(mode, f"output shape {list(b.shape)} instead of "
                               f"{list(a.shape)}", n)
            error = np.abs(a - b)
            worst = max(worst, float(error.max(initial=0.0)))
            if np.any(error > atol + rtol * np.abs(a)):
                raise _differs(mode, f"outputs differ by up to {float(error.max()):.3g}", n)
    return {"capture": mode.value, "samples": 2 * samples, "max_abs_diff": worst}


def _differs(mode: Capture, what: str, sample: int) -> StageError:
    if mode is Capture.TRACE:
        return StageError(
            f"the traced model differs from eager PyTorch on check input {sample + 1} "
            f"({what}): its output depends on control flow or shapes that tracing froze "
            "to the example input's path",
            "set `capture: script` (keeps `if`/loops) or `capture: export` "
            "(with torch.cond for data-dependent branches)")
    return StageError(f"capture: {mode.value} differs from eager PyTorch on check input "
                      f"{sample + 1} ({what})",
                      "try another `capture:` mode, or raise atol/rtol if the difference "
                      "is expected")


def export_failure(tool: str, exc: BaseException, step: str) -> StageError:
    """`step` (a torch.export of the model, by `tool`) failed: the model's line it stopped
    at, and what to try."""
    text = str(exc)
    first = first_line(text)
    where = user_frame(text)
    data_dependent = "data-dependent" in text or "GuardOnDataDependent" in type(exc).__name__
    hint = ("the model branches on a tensor's value (data-dependent control flow), which "
            "torch.export cannot capture: rewrite the branch with torch.where or torch.cond, "
            "or move it out of forward()" if data_dependent else
            "torch.export must capture forward() as one graph: see the line named; "
            "torch.export.draft_export(model, inputs) lists every problem at once")
    at = f" at {where}" if where else ""
    return StageError(f"{tool}: {step} failed{at} ({type(exc).__name__}: {first})", hint)


def user_frame(text: str) -> str:
    """`file:line: code` of the model's line torch.export quotes ("The following call
    raised this error:" / a stack trace), or ''."""
    match = re.search(r'File "([^"]+)", line (\d+), in (\w+)\s*\n\s*(.+)', text)
    if match is None:
        return ""
    path, line, func, code = match.groups()
    return f"{path.rsplit('/', 1)[-1]}:{line} in {func}: `{code.strip()}`"


def first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""
