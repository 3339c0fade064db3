"""The files the custom-op declarations name: keyed, and carried to remote workers."""

from __future__ import annotations

from pathlib import Path

from edgebuild.recipe.custom_ops import CustomOp, OpenVinoKernel, OrtKernel
from edgebuild.recipe.files import module_file, resolve_file, split_callable
from edgebuild.recipe.siblings import local_imports


def callables(op: CustomOp) -> dict[str, str]:
    """role -> `module:attr` of every Python callable the op names."""
    found = {"torch_op": op.torch_op}
    if op.decomposition is not None:
        found["decomposition"] = op.decomposition
    ort = op.kernels.onnxruntime
    if isinstance(ort, OrtKernel) and ort.python is not None:
        found["onnxruntime"] = ort.python
    ov = op.kernels.openvino
    if isinstance(ov, OpenVinoKernel):
        found["openvino"] = ov.conversion
    return found


def custom_op_files(ops: dict[str, CustomOp], base_dir: Path) -> dict[tuple[str, str], Path]:
    """(op name, role) -> file, for every source file and library the ops name
    (a module of an installed package too: its code is what runs), and (op name,
    `role/sibling.py`) for each module a `file.py` imports from its own folder."""
    files: dict[tuple[str, str], Path] = {}
    for name, op in ops.items():
        for role, ref in callables(op).items():
            module = split_callable(ref)[0]
            source = module_file(module, base_dir)
            if source is not None:
                files[(name, role)] = source
                if module.endswith(".py"):
                    files.update({(name, f"{role}/{rel}"): path
                                  for rel, path in local_imports(source)})
        ort = op.kernels.onnxruntime
        if isinstance(ort, OrtKernel) and ort.library is not None:
            files[(name, "onnxruntime-library")] = resolve_file(ort.library, base_dir)
    return files
