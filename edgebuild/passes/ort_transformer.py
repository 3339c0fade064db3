"""ort-transformer-optimize: ONNX Runtime's transformer fusions (Attention, SkipLayerNorm, ...).

`onnxruntime.transformers.optimizer.optimize_model` rewrites the subgraphs a
BERT-style export is made of into ONNX Runtime's fused contrib operators:
`Attention` (Q/K/V projections, scaled dot product, mask, softmax),
`EmbedLayerNormalization`, `SkipLayerNormalization` (residual Add +
LayerNorm), `BiasGelu`/`FastGelu`. Those ops live in the `com.microsoft`
domain, which only ONNX Runtime reads: the pass produces the format
`onnx-ort`, which the ONNX Runtime backend accepts and no other backend does,
so putting it in front of OpenVINO or TFLite is a plan-time error naming the
pass (list it under the ONNX Runtime targets' own `passes:`).

The fuser matches the patterns of an unsimplified exporter graph. A
simplifier merges the two `Unsqueeze`s of BERT's attention mask into one with
two axes, which the mask pattern does not match; they are split back first
(the same tensor; `unsqueezes_split` in the metadata).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.errors import StageError
from edgebuild.passes.onnx_stats import graph_stats

# FusionOptions attributes a recipe may switch; `enable_` is added in front.
FUSIONS = ("attention", "skip_layer_norm", "embed_layer_norm", "bias_skip_layer_norm",
           "bias_gelu", "gelu", "layer_norm", "gelu_approximation")


class OrtTransformerParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model_type: Literal["bert", "bart", "gpt2", "t5", "vit", "clip", "unet"] = Field(
        "bert", description="The family whose fusion patterns are tried (BERT, RoBERTa, "
        "MiniLM, DistilBERT: `bert`).")
    num_heads: int = Field(0, ge=0, description="Attention heads; 0: detected from the graph.")
    hidden_size: int = Field(0, ge=0, description="Hidden size; 0: detected from the graph.")
    opt_level: Literal[0, 1, 2, 99] = Field(
        0, description="ONNX Runtime graph level applied after the fusions: 0 none (the "
        "backend's compile applies its own), 1 basic, 2 extended, 99 all (hardware-specific).")
    disable: list[Literal[FUSIONS]] = Field(  # type: ignore[valid-type]
        default_factory=list, description=f"Fusions switched off: {', '.join(FUSIONS)}.")
    enable: list[Literal[FUSIONS]] = Field(  # type: ignore[valid-type]
        default_factory=list, description="Fusions switched on that are off by default "
        "(`gelu_approximation`: tanh GELU, changes the numbers slightly).")
    require: list[str] = Field(
        default_factory=list, description="Fused op types that must appear (e.g. "
        "[Attention]); the stage fails, naming what did not fuse, otherwise.")

    @model_validator(mode="after")
    def _heads_divide(self) -> OrtTransformerParams:
        if (self.num_heads == 0) != (self.hidden_size == 0):
            raise ValueError("give both num_heads and hidden_size, or neither (detected)")
        if self.num_heads and self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads "
                             f"{self.num_heads}")
        both = sorted(set(self.disable) & set(self.enable))
        if both:
            raise ValueError(f"{', '.join(both)} both enabled and disabled")
        return self


class OrtTransformerOptimize(Op):
    name = "ort-transformer-optimize"
    version = 1
    Params = OrtTransformerParams
    accepts = ("onnx",)
    produces = "onnx-ort"
    tools: ClassVar[tuple[str, ...]] = ("onnx", "onnxruntime")
    summary = "ONNX Runtime transformer fusions (Attention, SkipLayerNorm, BiasGelu): ORT only"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import onnx
        from onnxruntime.transformers.fusion_options import FusionOptions
        from onnxruntime.transformers.optimizer import optimize_model

        p: OrtTransformerParams = params
        source = ctx.input().main
        model = onnx.load(str(source))
        split = split_unsqueezes(model)
        work = ctx.out / "split.onnx"
        onnx.save(model, str(work))
        options = FusionOptions(p.model_type)
        for name in p.disable:
            setattr(options, f"enable_{name}", False)
        for name in p.enable:
            setattr(options, f"enable_{name}", True)
        optimized = optimize_model(str(work), model_type=p.model_type, num_heads=p.num_heads,
                                   hidden_size=p.hidden_size, optimization_options=options,
                                   opt_level=p.opt_level, use_gpu=False)
        work.unlink()
        fused = {k: int(v) for k, v in optimized.get_fused_operator_statistics().items() if v}
        missing = [op for op in p.require if not fused.get(op)]
        if missing:
            raise StageError(
                f"ort-transformer-optimize fused no {', '.join(missing)} (fused: "
                f"{fused or 'nothing'})",
                "the fuser matches the exporter's BERT patterns: export with the classic "
                "attention (MatMul, Div, Add mask, Softmax) and mask ((1 - mask) * min), or "
                "give num_heads and hidden_size")
        destination = ctx.out / "model.onnx"
        optimized.save_model_to_file(str(destination))
        return OpResult(main="model.onnx", format="onnx-ort",
                        metadata={"fusions": fused, "unsqueezes_split": split,
                                  "before": graph_stats(source),
                                  "after": graph_stats(destination)})


def split_unsqueezes(model: Any) -> int:
    """Replace each Unsqueeze of several constant axes by a chain of one-axis Unsqueezes.

    Inserting the sorted non-negative axes one at a time gives the same tensor.
    Returns how many were split.
    """
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    nodes = []
    count = 0
    for node in graph.node:
        axes = None
        if node.op_type == "Unsqueeze" and len(node.input) == 2 and \
                node.input[1] in initializers:
            axes = numpy_helper.to_array(initializers[node.input[1]]).reshape(-1)
        if axes is None or axes.size < 2 or bool((axes < 0).any()):
            nodes.append(node)
            continue
        current = node.input[0]
        ordered = sorted(int(a) for a in axes)
        for k, axis in enumerate(ordered):
            name = f"{node.name or node.output[0]}__axis{axis}"
            graph.initializer.append(numpy_helper.from_array(np.array([axis], np.int64),
                                                             f"{name}_axes"))
            out = node.output[0] if k == len(ordered) - 1 else f"{name}_out"
            nodes.append(helper.make_node("Unsqueeze", [current, f"{name}_axes"], [out],
                                          name=name))
            current = out
        count += 1
    del graph.node[:]
    graph.node.extend(nodes)
    return count
