"""What a stage reads besides its input artifacts, made to travel by content.

A stage on another machine (a Dask worker, an SSH host) must not read the
client's paths. Its spec names datasets and the model source by path; this
module rewrites every such path to one under a `carried/` folder of the task's
own recipe folder, and lists the client files that belong there, each with
its digest:

    client spec  datasets.calib.images: /usr/share/datasets/…/t10k-images.gz
    carried spec datasets.calib.images: carried/calib/t10k-images.gz
    files        {"carried/calib/t10k-images.gz": (sha256, /usr/share/…)}

The worker writes the files under its own task folder, checks each digest and
points the spec's `recipe_dir` there (far_side.py), so relative paths resolve as
they did on the client. A factory or dataset function named by module
(`package.module:fn`) is not carried: the worker imports its own installed
copy, and `expect_modules` lets it check that copy is the client's (same
digest), so a version skew fails the stage instead of building something else.

A `file.py:fn` travels with what it imports from beside it: the modules and
packages of its own folder that it (or they, in turn) import, found by reading
the source with `ast` (nothing of it runs on the client). They land beside it
in the same carried folder, so the `Path(__file__).parent` the file puts on
`sys.path` holds them on the worker as it does on the client:

    models/train_fashion_mnist.py  (from fashion_mnist_cnn import build)
      -> carried/hooks/train_fashion_mnist.py + carried/hooks/fashion_mnist_cnn.py
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgebuild.core.digest import digest_file
from edgebuild.errors import EdgebuildError
from edgebuild.recipe.common import PackageFile
from edgebuild.recipe.files import module_file, resolve_file, split_callable
from edgebuild.recipe.siblings import local_imports

CARRIED = "carried"


@dataclass
class Carried:
    spec: dict[str, Any]
    files: dict[str, tuple[str, Path]] = field(default_factory=dict)  # rel -> (digest, path)
    expect_modules: dict[str, str] = field(default_factory=dict)  # module -> digest


class _Packer:
    def __init__(self, base_dir: Path, digests: dict[Path, str]) -> None:
        self.base_dir = base_dir
        self.digests = digests  # shared across tasks: a file is hashed once per run
        self.out = Carried({})

    def file(self, ref: str | dict[str, Any], folder: str, role: str = "") -> str:
        """The carried path of one file. Its name is kept (loaders read `.gz` from it);
        `role` keeps two files of one dataset with the same name apart."""
        path = resolve_file(PackageFile.model_validate(ref) if isinstance(ref, dict) else ref,
                            self.base_dir)
        rel = f"{CARRIED}/{folder}/{role}{path.name}"
        self.add(rel, path)
        return rel

    def add(self, rel: str, path: Path) -> None:
        real = path.resolve()
        if real not in self.digests:
            self.digests[real] = digest_file(real)
        known = self.out.files.get(rel)
        if known is not None and known[1] != real:
            raise EdgebuildError(f"two files would travel as {rel}: {known[1]} and {real}",
                                 "rename one of them")
        self.out.files[rel] = (self.digests[real], real)

    def callable(self, ref: str, folder: str) -> str:
        module, attr = split_callable(ref)
        if module.endswith(".py"):
            carried = self.file(module, folder)
            for rel, path in local_imports(resolve_file(module, self.base_dir)):
                self.add(f"{CARRIED}/{folder}/{rel}", path)
            return f"{carried}:{attr}"
        source = module_file(module, self.base_dir)
        if source is not None:
            real = source.resolve()
            self.digests.setdefault(real, digest_file(real))
            self.out.expect_modules[module] = self.digests[real]
        return ref

    def dataset(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        from edgebuild.data.digest import image_files
        from edgebuild.recipe.datasets import ImageFolder

        data = dict(data)
        folder = f"datasets/{name}"
        kind = data["kind"]
        if kind == "images":
            spec = ImageFolder.model_validate(data)
            several = isinstance(spec.path, list)
            for image in image_files(spec, self.base_dir):
                rel = image.name if several else f"0/{image.name}"  # "<folder index>/<name>"
                self.add(f"{CARRIED}/{folder}/{rel}", image.path)
            folders = [f"{CARRIED}/{folder}/{i}" for i in range(len(spec.folders))]
            data["path"] = folders if several else folders[0]
        elif kind == "idx":
            data["images"] = self.file(data["images"], folder, "images/")
            if data.get("labels") is not None:
                data["labels"] = self.file(data["labels"], folder, "labels/")
        elif kind == "npz":
            data["path"] = self.file(data["path"], folder)
        elif kind == "callable":
            data["function"] = self.callable(data["function"], folder)
        return data

    def custom_ops(self, ops: dict[str, Any]) -> dict[str, Any]:
        """Each op's torch op, decomposition and kernels, carried like a factory: a
        `file.py:fn` travels by content, a `module:fn` is expected installed alike."""
        carried = {}
        for name, op in ops.items():
            op = {**op, "kernels": dict(op.get("kernels") or {})}
            folder = "model"  # beside the factory: one file the model and its op share
            op["torch_op"] = self.callable(op["torch_op"], folder)
            if op.get("decomposition"):
                op["decomposition"] = self.callable(op["decomposition"], folder)
            ort = op["kernels"].get("onnxruntime")
            if isinstance(ort, dict):
                ort = dict(ort)
                if ort.get("python"):
                    ort["python"] = self.callable(ort["python"], folder)
                if ort.get("library") is not None:
                    ort["library"] = self.file(ort["library"], folder)
                op["kernels"]["onnxruntime"] = ort
            ov = op["kernels"].get("openvino")
            if isinstance(ov, dict):
                op["kernels"]["openvino"] = {**ov, "conversion": self.callable(
                    ov["conversion"], folder)}
            carried[name] = op
        return carried

    def source(self, model: dict[str, Any]) -> dict[str, Any]:
        model = dict(model)
        if model.get("onnx") is not None:
            model["onnx"] = self.file(model["onnx"], "model")
        if model.get("weights") is not None:
            model["weights"] = self.file(model["weights"], "model")
        if model.get("factory") is not None:
            model["factory"] = self.callable(model["factory"], "model")
        return model


def carry(spec: dict[str, Any], digests: dict[Path, str] | None = None) -> Carried:
    """`spec` with every dataset and model-source path made relative to `carried/`,
    and the client files to send. `digests` caches file digests across calls."""
    packer = _Packer(Path(spec["recipe_dir"]), {} if digests is None else digests)
    carried = {**spec, "datasets": {name: packer.dataset(name, data)
                                    for name, data in spec["datasets"].items()}}
    if spec.get("source") is not None:
        carried["source"] = packer.source(spec["source"])
    if spec.get("custom_ops"):
        carried["custom_ops"] = packer.custom_ops(spec["custom_ops"])
    if spec.get("callable_params"):  # prune's finetune: carried like a factory
        carried["params"] = {**spec["params"], **{
            name: packer.callable(spec["params"][name], "hooks")
            for name in spec["callable_params"]}}
    packer.out.spec = carried
    return packer.out


def check_modules(expected: dict[str, str], base_dir: Path) -> str:
    """'' when this machine's copy of each module is the client's; else what differs."""
    for module, digest in sorted(expected.items()):
        try:
            source = module_file(module, base_dir)
        except (EdgebuildError, ImportError, ValueError) as exc:  # not installed here
            return f"module {module} is not importable on this worker: {exc}"
        if source is None or digest_file(source) != digest:
            return (f"module {module} on this worker differs from the client's "
                    f"({source}): install the same version on both")
    return ""
