"""Names a PyTorch model's modules go by after torch.onnx: a recipe names its float layers
once, as the ONNX export names them, and each path from PyTorch (Core ML's weight
compression, ExecuTorch's PT2E) finds the same modules."""

from __future__ import annotations

import re


def module_name(name: str) -> str:
    """A PyTorch module name from an ONNX node or output name torch.onnx exported it as:
    its scopes, then the op. A scope is a child's attribute name or a container's
    qualified child (`/_blocks.0/_project_conv/Conv`, `/layer1/layer1.0/conv1/Conv`,
    `/features/features.6/Conv_output_0`). A module name is returned as is."""
    if not name.startswith("/"):
        return name
    parts = re.sub(r"_output_\d+$", "", name).strip("/").split("/")
    current = ""
    for part in parts[:-1] or parts:
        current = part if not current or part.startswith(current + ".") else (
            f"{current}.{part}")
    return current
