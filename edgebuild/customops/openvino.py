"""OpenVINO: the declared ops' conversion extensions for `convert_model`.

A conversion maps the ONNX node onto OpenVINO's own opset when the ONNX model
is read, so the saved IR holds only built-in ops: reading it back (the runner,
the latency measurement, another machine) needs neither the extension nor the
recipe's files.
"""

from __future__ import annotations

from typing import Any

from edgebuild.customops.declared import active
from edgebuild.errors import StageError
from edgebuild.recipe.custom_ops import DECOMPOSE, OpenVinoKernel


def convert_kwargs(onnx_path: Any) -> dict[str, Any]:
    """`convert_model` keyword arguments: the extensions, when the model needs any
    (OpenVINO 2026.4 refuses `extension=[]`)."""
    found = extensions(onnx_path)
    return {"extension": found} if found else {}


def extensions(onnx_path: Any) -> list[Any]:
    """ConversionExtensions for the declared ops the ONNX model at `onnx_path` uses."""
    declared = active()
    if not declared:
        return []
    import onnx
    from openvino.frontend.onnx import ConversionExtension

    from edgebuild.customops.ort import custom_nodes

    found = []
    model = onnx.load(str(onnx_path), load_external_data=False)
    for name, op in custom_nodes(model, declared).items():
        kernel = op.kernels.openvino
        if not isinstance(kernel, OpenVinoKernel):
            how = "is decomposed for it" if kernel == DECOMPOSE else "has none"
            raise StageError(f"the model holds custom op '{op.domain}::{name}' and OpenVINO has "
                             f"no conversion for it (kernels.openvino {how})",
                             "add `kernels.openvino: {conversion: file.py:fn}` to the op")
        found.append(ConversionExtension(name, op.domain, declared.load(kernel.conversion)))
    return found
