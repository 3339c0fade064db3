"""export-onnx: PyTorch -> ONNX, then prove the export computes what PyTorch does.

The check runs both on seeded random inputs and fails the stage when outputs
differ by more than `atol + rtol * |reference|`: a silently wrong export is
the most expensive bug in a deployment pipeline, because every later number
is measured on the wrong model. A model with `dynamic_axes` is also run once at
twice each dynamic size: an exporter that fixed the example's size (torch.export
fixes an LSTM's sequence length, and the Reshape after it holds that length) fails
here, naming the axis, not later in a runtime's Reshape.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.errors import StageError
from edgebuild.passes.onnx_stats import graph_stats
from edgebuild.passes.torch_capture import Capture, capture, check_capture
from edgebuild.passes.torch_model import load_stage_model, sample_inputs


class ExportParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    opset: int = Field(17, ge=11, le=23, description="ONNX opset version.")
    exporter: Literal["legacy", "dynamo"] = Field(
        "legacy", description="`legacy` (TorchScript) or `dynamo` (torch.export, opset >= 18)."
    )
    capture: Capture | None = Field(
        None, description="How the model is captured: `trace` (the legacy exporter's "
        "default; checked against eager PyTorch on inputs and their negations, so frozen "
        "control flow fails the stage), `script` (torch.jit.script: keeps `if`/loops; "
        "legacy exporter) or `export` (torch.export: the dynamo exporter).")
    check_samples: int = Field(2, ge=0, le=64, description="Random inputs compared after export.")
    atol: float = Field(1e-4, ge=0, description="Absolute tolerance of the check.")
    rtol: float = Field(1e-3, ge=0, description="Relative tolerance of the check.")
    decompose_custom_ops: list[str] = Field(
        default_factory=list, description="Custom ops (recipe `custom_ops:`) written as their "
        "decomposition instead of a custom node; the planner adds those a target's backend "
        "decomposes (docs/custom-ops.md).")

    @model_validator(mode="after")
    def _dynamo_opset(self) -> ExportParams:
        if self.exporter == "dynamo" and self.opset < 18:
            raise ValueError("the dynamo exporter needs opset >= 18")
        if self.capture is Capture.EXPORT and self.exporter != "dynamo":
            raise ValueError("`capture: export` is the dynamo exporter: set `exporter: dynamo`")
        if self.capture in (Capture.TRACE, Capture.SCRIPT) and self.exporter == "dynamo":
            raise ValueError(f"`capture: {self.capture.value}` needs `exporter: legacy` "
                             "(the dynamo exporter captures with torch.export)")
        return self


class ExportOnnx(Op):
    name = "export-onnx"
    version = 3  # 2: custom ops (symbolics, custom opsets, a check with their kernels)
    # 3: dynamo traces a dynamic axis at its declared size
    Params = ExportParams
    accepts = ("pytorch",)
    produces = "onnx"
    tools: ClassVar[tuple[str, ...]] = ("torch", "onnx", "onnxruntime")
    summary = "PyTorch -> ONNX, checked against PyTorch on sample inputs"
    reads_source = True  # the model (pruned or not) is rebuilt by the recipe's factory

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import torch

        p: ExportParams = params
        model = load_stage_model(ctx)
        tensors = ctx.io.inputs
        names = [t["name"] for t in tensors]
        model_to_export = model
        outputs = ctx.io.outputs
        example = tuple(torch.zeros(t["shape"], dtype=getattr(torch, t["dtype"]))
                        for t in tensors)
        dynamic = {t["name"]: {int(k): v for k, v in t["dynamic_axes"].items()}
                   for t in tensors if t["dynamic_axes"]}
        destination = ctx.out / "model.onnx"
        kwargs: dict[str, Any] = {
            "input_names": names, "output_names": outputs, "opset_version": p.opset,
        }
        captured: dict[str, Any] = {}
        custom = self._custom_ops(p, kwargs, model)
        if p.exporter == "legacy":
            kwargs["dynamo"] = False
            kwargs["dynamic_axes"] = dynamic or None
            mode = p.capture or Capture.TRACE
            graph = capture(model, tensors, mode)
            # A trace that froze a branch is caught here, naming the mode to use; the
            # exporter then traces the eager model itself as it always did.
            captured = check_capture(model, graph, tensors, mode, max(p.check_samples, 1),
                                     p.atol, p.rtol)
            if mode is Capture.SCRIPT:
                model_to_export = graph
        else:
            kwargs.update(dynamo=True, external_data=False, optimize=True)
            if dynamic:
                # torch.export matches dynamic shapes to the forward() arguments by
                # position, and treats sizes 0/1 as constants: a dynamic axis is traced
                # at its declared size, or 2 where that is 0 or 1 (tracing every one at
                # 2 failed a CRNN whose width must be at least 4: `2 not in VR[4, …]`).
                kwargs["dynamic_shapes"] = tuple(
                    {a: torch.export.Dim.DYNAMIC for a in dynamic.get(t["name"], {})} or None
                    for t in tensors)
                example = tuple(
                    torch.zeros([max(d, 2) if i in dynamic.get(t["name"], {}) else d
                                 for i, d in enumerate(t["shape"])],
                                dtype=getattr(torch, t["dtype"]))
                    for t in tensors)
        try:
            with torch.no_grad():
                torch.onnx.export(model_to_export, example, str(destination), **kwargs)
        except StageError:
            raise  # from a custom op's symbolic: it says what is wrong already
        except Exception as exc:  # the exporter's own types; an unknown op is the common one
            # Chained: the stage log keeps the exporter's trace, the user gets one line.
            raise _export_error(exc, custom, model) from exc
        check = self._check(model, destination, tensors, p)
        if p.check_samples and dynamic and "skipped" not in check:
            check["dynamic_axes"] = _check_other_size(model, destination, tensors, p)
        return OpResult(
            main="model.onnx", format="onnx",
            metadata={"exporter": p.exporter, "opset": p.opset, "check": check,
                      "capture_check": captured, "custom_ops": custom,
                      "graph": graph_stats(destination)},
        )

    @staticmethod
    def _custom_ops(p: ExportParams, kwargs: dict[str, Any], model: Any) -> dict[str, str]:
        """Register the declared ops' symbolics (and ONNX schemas); torch op -> export."""
        from edgebuild.customops import export, onnx_schema
        from edgebuild.customops.declared import active

        declared = active()
        unknown = sorted(set(p.decompose_custom_ops) - set(declared.ops))
        if unknown:
            raise StageError(f"decompose_custom_ops names {unknown}, which `custom_ops:` does "
                             "not declare", f"declared: {sorted(declared.ops) or 'none'}")
        if not declared:
            return {}
        if p.exporter == "dynamo":
            raise StageError("custom ops are exported with the legacy exporter",
                             "remove `exporter: dynamo` (docs/custom-ops.md, Limits)")
        onnx_schema.register(declared.ops)
        decompose = set(p.decompose_custom_ops)
        kwargs["custom_opsets"] = export.custom_opsets(declared, decompose)
        return export.register_symbolics(declared, p.opset, decompose, model)

    def _check(self, model: Any, path: Any, tensors: list[dict[str, Any]],
               p: ExportParams) -> dict[str, Any]:
        import numpy as np
        import onnx
        import torch

        from edgebuild.customops import ort as custom_ort

        if p.check_samples == 0:
            return {"samples": 0}
        without = custom_ort.missing_kernels(onnx.load(str(path)))
        if without:
            # The accuracy gates still compare each backend's build with PyTorch.
            return {"samples": 0, "skipped": f"custom ops {', '.join(without)} have no ONNX "
                    "Runtime kernel to run the check with"}
        session = custom_ort.session(path)
        worst = 0.0
        for feeds in sample_inputs(tensors, seed=0, count=p.check_samples):
            with torch.no_grad():
                expected = model(*(torch.from_numpy(v) for v in feeds.values()))
            expected_list = [expected] if isinstance(expected, torch.Tensor) else list(expected)
            got = session.run(None, feeds)
            for ref, out in zip(expected_list, got, strict=False):
                ref_np = ref.detach().numpy()
                if ref_np.shape != out.shape:
                    raise StageError(f"export check: output shape {list(out.shape)} differs "
                                     f"from PyTorch's {list(ref_np.shape)}")
                error = np.abs(ref_np - out)
                worst = max(worst, float(error.max()))
                if np.any(error > p.atol + p.rtol * np.abs(ref_np)):
                    raise StageError(
                        f"export check failed: ONNX differs from PyTorch by up to "
                        f"{float(error.max()):.3g} (atol {p.atol}, rtol {p.rtol})",
                        "try the other exporter or another opset, or raise atol/rtol "
                        "if the difference is expected",
                    )
        return {"samples": p.check_samples, "max_abs_diff": worst}


RECURRENT = ("LSTM", "GRU", "RNN")


def recurrent_layers(model: Any) -> list[str]:
    """The model's LSTM / GRU / RNN modules, by name: torch.export fixes their sequence
    length at the example's (PyTorch 2.13), so the dynamo exporter cannot keep it dynamic."""
    return [name or type(m).__name__ for name, m in model.named_modules()
            if type(m).__name__ in RECURRENT]


def _check_other_size(model: Any, path: Any, tensors: list[dict[str, Any]],
                      p: ExportParams) -> dict[str, Any]:
    """Run PyTorch and the export once with every dynamic axis at twice its declared size
    (twice keeps any divisibility the declared size has). A size PyTorch itself refuses is
    not the export's fault: the check is skipped, saying so."""
    import numpy as np
    import torch

    from edgebuild.customops import ort as custom_ort

    shapes = {t["name"]: [2 * d if i in {int(a) for a in t["dynamic_axes"]} else d
                          for i, d in enumerate(t["shape"])] for t in tensors}
    resized = {t["name"]: {t["dynamic_axes"][a]: shapes[t["name"]][int(a)]
                           for a in t["dynamic_axes"]} for t in tensors if t["dynamic_axes"]}
    (feeds,) = sample_inputs(tensors, seed=1, count=1, shapes=shapes)
    try:
        with torch.no_grad():
            expected = model(*(torch.from_numpy(v) for v in feeds.values()))
    except Exception as exc:  # the model's own limits (a fixed-size layer)
        return {"shapes": shapes, "skipped": f"PyTorch fails at these sizes ({exc})"[:300]}
    expected_list = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    named = "; ".join(f"{name}: {', '.join(f'{k} = {v}' for k, v in axes.items())}"
                      for name, axes in resized.items())
    try:
        got = custom_ort.session(path).run(None, feeds)
    except Exception as exc:  # ONNX Runtime's error: a Reshape holding the example's size
        raise _fixed_size_error(model, p, named, str(exc)) from exc
    worst = 0.0
    for ref, out in zip(expected_list, got, strict=False):
        ref_np = ref.detach().numpy()
        if ref_np.shape != out.shape:
            raise _fixed_size_error(model, p, named, f"output shape {list(out.shape)}, "
                                    f"PyTorch's {list(ref_np.shape)}")
        error = np.abs(ref_np - out)
        worst = max(worst, float(error.max()) if error.size else 0.0)
        if np.any(error > p.atol + p.rtol * np.abs(ref_np)):
            raise _fixed_size_error(model, p, named, f"outputs differ from PyTorch's by up "
                                    f"to {float(error.max()):.3g}")
    return {"shapes": shapes, "max_abs_diff": worst}


def _fixed_size_error(model: Any, p: ExportParams, named: str, what: str) -> StageError:
    first = what.strip().splitlines()[0][:300] if what.strip() else what
    recurrent = recurrent_layers(model)
    if p.exporter == "dynamo" and recurrent:
        hint = (f"torch.export fixes the sequence length of {', '.join(recurrent)} at the "
                "example's, and what follows keeps it (a Reshape): use `exporter: legacy` "
                "(an adaptive pooling over the axis written as a mean, "
                "`x.mean(dim=…, keepdim=True)`), or drop the axis from `dynamic_axes`")
    else:
        hint = ("the export recorded the example's size as a constant (a `view`/`reshape` "
                "computed from `x.shape`, a Python int): reshape with -1, try "
                + ("`capture: script`" if p.exporter == "legacy" else "`exporter: legacy`")
                + ", or drop the axis from `dynamic_axes`")
    return StageError(f"the ONNX export does not take the dynamic axes at other sizes "
                      f"({named}, twice the declared): {first}", hint)


def _export_error(exc: Exception, custom: dict[str, str], model: Any = None) -> Exception:
    """A StageError naming the op the exporter could not write and what registers it."""
    from edgebuild.customops.export import unregistered_op

    op = unregistered_op(exc)
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    if "output_size is not constant" in str(exc) or "adaptive_avg_pool" in str(exc):
        # Not dynamo for a model with a recurrent layer: it fixes the sequence length.
        dynamo = "" if model is None or recurrent_layers(model) else \
            ", or set `exporter: dynamo`"
        return StageError(
            f"the ONNX export failed on an adaptive pooling ({type(exc).__name__}: {first})",
            "the legacy exporter writes AdaptiveAvgPool only for sizes it knows: with a dynamic "
            "axis, write the reduction as a mean over that axis (`x.mean(dim=…, keepdim=True)`, "
            f"e.g. for AdaptiveAvgPool2d((None, 1))){dynamo}")
    if not op:
        return StageError(f"the ONNX export failed ({type(exc).__name__}: {first})",
                          "see the stage log for the exporter's trace")
    if "::" in op and op.split("::")[0] not in ("aten", "prim", "onnx"):
        return StageError(
            f"the ONNX export failed: torch op '{op}' has no ONNX registration (no symbolic: "
            "it is not declared in the recipe's `custom_ops:`"
            + (f", which registers {', '.join(sorted(custom))})" if custom else ")"),
            "declare it under `custom_ops:` with its `torch_op`, `onnx_schema` and a kernel "
            "or decomposition per backend (docs/custom-ops.md)")
    return StageError(f"the ONNX export failed: op '{op}' has no ONNX symbolic at this opset "
                      f"({first})", "try another opset" + (
                          "" if model is not None and recurrent_layers(model)
                          else ", or `exporter: dynamo`"))
