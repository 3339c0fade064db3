"""Dataset digests for cache keys: the spec plus every file's content (no numpy needed)."""

from __future__ import annotations

from pathlib import Path

from edgebuild.cache.digest import StatCache, digest_json
from edgebuild.errors import DataError
from edgebuild.recipe.datasets import DatasetSpec, IdxFiles, ImageFolder, NpzFile
from edgebuild.recipe.files import module_file, resolve_file, split_callable


def image_files(spec: ImageFolder, base_dir: Path) -> list[Path]:
    root = resolve_file(spec.path, base_dir)
    if not root.is_dir():
        raise DataError(f"image folder {root} does not exist")
    files = sorted({f for pattern in spec.patterns for f in root.rglob(pattern) if f.is_file()})
    if not files:
        raise DataError(f"image folder {root} has no files matching {spec.patterns}")
    return files


def _files_of(spec: DatasetSpec, base_dir: Path) -> list[Path]:
    if isinstance(spec, ImageFolder):
        return image_files(spec, base_dir)
    if isinstance(spec, IdxFiles):
        refs = [spec.images] + ([spec.labels] if spec.labels is not None else [])
        return [resolve_file(r, base_dir) for r in refs]
    if isinstance(spec, NpzFile):
        return [resolve_file(spec.path, base_dir)]
    module, _ = split_callable(spec.function)
    source = module_file(module, base_dir)
    return [source] if source is not None else []


def dataset_digest(spec: DatasetSpec, base_dir: Path, stats: StatCache) -> str:
    """Digest of everything that decides the samples: the spec and each file's content."""
    files = _files_of(spec, base_dir)
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise DataError(f"dataset file not found: {missing[0]}")
    root = resolve_file(spec.path, base_dir) if isinstance(spec, ImageFolder) else None
    names = [str(f.relative_to(root)) if root else f.name for f in files]
    return digest_json({
        "spec": spec.model_dump(mode="json"),
        "files": [[n, stats.digest(f)] for n, f in zip(names, files, strict=True)],
    })
