"""The recipe's float layers (`keep_float`: PyTorch module names) as ai-edge-quantizer scopes.

ai-edge-quantizer picks an op's recipe by a regex searched in the op's *scope*: its output
tensors' names (ai_edge_quantizer/utils/tfl_flatbuffer_utils.py, get_op_scope).
LiteRT-Torch names each tensor after the module stack of the PyTorch ops that made it,
one `Class_attribute` segment per module, `;` after each location, fused ops' locations
joined (litert_torch/backend/debuginfo/_build.py, `_get_hierarchy`):

    efficientnet_lite_pytorch.model.EfficientNet/efficientnet_lite_pytorch.model.MBConvBlock_0/
    efficientnet_lite_pytorch.utils.Conv2dStaticSamePadding__project_conv;

So the module `_blocks.0._project_conv` is the location prefix above, read from the same
module stack torch.export records (`scopes`), and an op is kept float when one of its
locations starts with it (`pattern`). One exception: a tensor that is a model output is
named after the signature's output (`serving_default_output_0_output`), not its module,
so a module that computes an output (a classifier head) also gets that name
(`produces`, `output_names`). `matched` counts the ops each pattern keeps in the
converted model: a module that keeps none is an error, never a silent int8 layer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from edgebuild.errors import StageError


def scopes(exported: Any, modules: list[str]) -> dict[str, str]:
    """{module: the location prefix LiteRT-Torch gives its ops} from the module stacks of
    `exported` (a torch.export ExportedProgram of the model converted)."""
    found: dict[str, str] = {}
    wanted = set(modules)
    for node in exported.graph.nodes:
        stack = list((node.meta.get("nn_module_stack") or {}).values())
        for depth, (path, _) in enumerate(stack):
            if path in wanted and path not in found:
                found[path] = "/".join(_segment(p, kind) for p, kind in stack[:depth + 1])
    return found


def _segment(path: str, kind: Any) -> str:
    """One module's part of a location: its class, `_` and the last part of its name (the
    root module has no name)."""
    name = kind if isinstance(kind, str) else (
        kind.__qualname__ if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}")
    return name + (f"_{path.rsplit('.', 1)[-1]}" if path else "")


def pattern(scope: str, outputs: list[str] | None = None) -> str:
    """The regex that finds an op with a location inside `scope` (the module's own ops and
    its children's), wherever it stands among the fused op's locations, or one that
    writes a model output named in `outputs`."""
    found = [f"(?:^|;){re.escape(scope)}[/;]",
             *(f"(?:^|;){re.escape(name)};" for name in outputs or [])]
    return "|".join(found)


def produces(exported: Any, modules: list[str]) -> dict[str, list[int]]:
    """{module: the positions of the model outputs an op inside it computes}."""
    from torch.export.graph_signature import OutputKind

    user = [spec.arg.name for spec in exported.graph_signature.output_specs
            if spec.kind == OutputKind.USER_OUTPUT]
    nodes = {node.name: node for node in exported.graph.nodes}
    found: dict[str, list[int]] = {}
    for position, name in enumerate(user):
        stack = (nodes[name].meta.get("nn_module_stack") or {}) if name in nodes else {}
        paths = {path for path, _ in stack.values()}
        for module in modules:
            if module in paths:
                found.setdefault(module, []).append(position)
    return found


def output_names(model: Path) -> list[str]:
    """The .tflite's output tensor names, in the signature's numbered order."""
    from ai_edge_litert.interpreter import Interpreter

    from edgebuild.backends.tflite.tensors import in_order

    interpreter = Interpreter(model_path=str(model))
    details = interpreter.get_signature_runner().get_output_details()
    names = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
    return [names[details[key]["index"]] for key in in_order(details)]


def matched(model: Path, patterns: dict[str, str]) -> dict[str, int]:
    """{module: how many of the .tflite's ops its pattern matches}, read as ai-edge-quantizer
    reads the scopes it matches."""
    from ai_edge_quantizer.utils import tfl_flatbuffer_utils as tfl

    flatbuffer = tfl.read_model(str(model))
    counts = dict.fromkeys(patterns, 0)
    for subgraph in flatbuffer.subgraphs:
        for op in subgraph.operators:
            scope = tfl.get_op_scope(op, subgraph.tensors)
            for module, regex in patterns.items():
                counts[module] += bool(re.search(regex, scope))
    return counts


def check(counts: dict[str, int]) -> None:
    """A StageError naming the `keep_float` modules no op of the model came from."""
    missing = [module for module, count in counts.items() if not count]
    if missing:
        raise StageError(f"LiteRT-Torch: keep_float {', '.join(missing)}: no op of the "
                         ".tflite is named after it (LiteRT-Torch fused it into another "
                         "layer's op, or it does no computation)",
                         "name the module whose op computes it (a conv or linear, not its "
                         "activation), or drop it from keep_float")
