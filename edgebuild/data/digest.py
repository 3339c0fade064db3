"""Dataset digests for cache keys: the spec plus every file's content (no numpy needed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgebuild.cache.digest import StatCache
from edgebuild.core.digest import digest_json
from edgebuild.errors import DataError, EdgebuildError
from edgebuild.recipe.datasets import DatasetSpec, IdxFiles, ImageFolder, NpzFile
from edgebuild.recipe.files import module_file, resolve_file, split_callable
from edgebuild.recipe.siblings import local_imports


@dataclass(frozen=True)
class ImageFile:
    path: Path
    name: str  # relative to its folder; prefixed with the folder's index when there are several
    relative: str = ""  # relative to its folder, never prefixed (label files are named so)


def image_files(spec: ImageFolder, base_dir: Path) -> list[ImageFile]:
    """The images of every listed folder: folders in the order written, files sorted.

    A file reached through two folders (one inside the other) is kept once, in
    the first. Every folder must exist and hold at least one matching file: a
    folder that silently adds nothing is almost always a typo.
    """
    several = isinstance(spec.path, list)
    seen: set[Path] = set()
    out: list[ImageFile] = []
    for index, ref in enumerate(spec.folders):
        key = f"path[{index}]: " if several else ""
        try:
            root = resolve_file(ref, base_dir)
        except EdgebuildError as exc:
            raise DataError(f"{key}{exc.message}", exc.hint) from None
        if not root.is_dir():
            raise DataError(f"{key}image folder {root} does not exist",
                            "relative paths are relative to the recipe's folder"
                            if isinstance(ref, str) and not Path(ref).is_absolute() else "")
        files = sorted({f for pattern in spec.patterns for f in root.rglob(pattern)
                        if f.is_file()})
        if not files:
            raise DataError(f"{key}image folder {root} has no files matching {spec.patterns}")
        for file in files:
            real = file.resolve()
            if real in seen:
                continue
            seen.add(real)
            name = str(file.relative_to(root))
            out.append(ImageFile(file, f"{index}/{name}" if several else name,
                                 file.relative_to(root).as_posix()))
    return out


def label_files(spec: ImageFolder, base_dir: Path) -> list[tuple[str, Path]]:
    """The detection label files a dataset reads (named `labels/…`), for its digest."""
    labels = spec.box_labels
    if labels is None:
        return []
    root = resolve_file(labels.path, base_dir)
    if labels.format == "coco":
        return [(f"labels/{root.name}", root)]
    if not root.is_dir():
        raise DataError(f"YOLO label folder {root} does not exist")
    return [(f"labels/{f.relative_to(root).as_posix()}", f)
            for f in sorted(root.rglob("*.txt")) if f.is_file()]


def _files_of(spec: DatasetSpec, base_dir: Path) -> list[tuple[str, Path]]:
    if isinstance(spec, ImageFolder):
        images = [(f.name, f.path) for f in image_files(spec, base_dir)]
        return images + label_files(spec, base_dir)
    if isinstance(spec, IdxFiles):
        refs = [spec.images] + ([spec.labels] if spec.labels is not None else [])
        paths = [resolve_file(r, base_dir) for r in refs]
    elif isinstance(spec, NpzFile):
        paths = [resolve_file(spec.path, base_dir)]
    else:
        module, _ = split_callable(spec.function)
        source = module_file(module, base_dir)
        paths = [source] if source is not None else []
        if source is not None and module.endswith(".py"):  # and what it imports beside it
            return [(source.name, source)] + [(f"imports/{rel}", path)
                                               for rel, path in local_imports(source)]
    return [(p.name, p) for p in paths]


def dataset_digest(spec: DatasetSpec, base_dir: Path, stats: StatCache) -> str:
    """Digest of everything that decides the samples: the spec and each file's content.

    Image files are named relative to their folder (with the folder's index when
    `path` lists several), so moving the recipe or the environment keeps the key,
    while adding, removing, renaming or editing any file changes it.
    """
    files = _files_of(spec, base_dir)
    missing = [f for _, f in files if not f.is_file()]
    if missing:
        raise DataError(f"dataset file not found: {missing[0]}")
    dumped = spec.model_dump(mode="json")
    if dumped.get("stream") is None:  # a dataset declared before streams keeps its key
        dumped.pop("stream", None)
    return digest_json({
        "spec": dumped,
        "files": [[name, stats.digest(f)] for name, f in files],
    })
