"""Dataset declarations: where samples come from and how they are prepared.

Loading happens in `edgebuild.data`; this module is schema only, so that
validating a recipe never touches the data.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from edgebuild.recipe.common import FileRef, PackageFile, Strict
from edgebuild.recipe.stream import StreamSteps


class Sampling(Strict):
    """Deterministic sampling shared by every dataset kind."""

    limit: int | None = Field(None, ge=1, description="Use at most this many samples.")
    seed: int = Field(0, description="Seed of the sample choice when `limit` cuts the set.")
    input: str | None = Field(
        None, description="Model input fed by this dataset; default: the first input."
    )
    stream: StreamSteps | None = Field(
        None, description="Each sample is a sequence (a recording), cut into the model's "
        "steps and evaluated step by step with the recipe's `state:` carried "
        "(docs/recipes.md#streams). Only accuracy gates read such a dataset.")


class Normalize(Strict):
    """`(value * scale - mean) / std`, per channel."""

    scale: float = Field(1.0, description="Multiplies raw pixel values (0..255) first.")
    mean: list[float] = Field(default_factory=lambda: [0.0])
    std: list[float] = Field(default_factory=lambda: [1.0])
    layout: Literal["NCHW", "NHWC"] = "NCHW"

    @model_validator(mode="after")
    def _std_not_zero(self) -> Normalize:
        if any(s == 0 for s in self.std):
            raise ValueError("std must not contain 0")
        return self


class ImagePreprocess(Normalize):
    resize: int | None = Field(None, ge=1, description="Resize the shorter side to this.")
    center_crop: int | None = Field(None, ge=1, description="Then crop a square of this size.")
    letterbox: list[int] | None = Field(
        None, min_length=2, max_length=2, description="`[height, width]`: scale the image to "
        "fit inside, keeping its aspect ratio, and pad the rest with `pad_value` (centred), "
        "as detectors are fed. Not with `resize`/`center_crop`.")
    pad_value: int = Field(114, ge=0, le=255, description="Pixel value of letterbox padding.")
    dtype: Literal["float32", "uint8"] = Field(
        "float32", description="`uint8`: raw pixels, for a model that normalises inside its "
        "graph (`model.prepost`); scale, mean and std must then stay 1, 0, 1.")
    color: Literal["rgb", "bgr", "gray"] = "rgb"

    @model_validator(mode="after")
    def _letterbox_alone(self) -> ImagePreprocess:
        if self.letterbox is not None:
            if self.resize is not None or self.center_crop is not None:
                raise ValueError("letterbox replaces resize/center_crop: give one or the other")
            if min(self.letterbox) < 1:
                raise ValueError("letterbox sizes must be >= 1")
        if self.dtype == "uint8" and (self.scale != 1.0 or any(self.mean) or
                                      any(s != 1.0 for s in self.std)):
            raise ValueError("dtype uint8 keeps raw pixels: remove scale/mean/std (the model "
                             "normalises them itself, e.g. with model.prepost.input)")
        return self


def _ref_kind(value: Any) -> str:
    return "package" if isinstance(value, dict | PackageFile) else "path"


def _count_kind(value: Any) -> str:
    return "several" if isinstance(value, list) else "one"


# Tagged rather than plain unions: a typo inside one entry of a list then gives
# one problem at that entry, not one per union member.
FolderRef = Annotated[
    Annotated[str, Tag("path")] | Annotated[PackageFile, Tag("package")],
    Discriminator(_ref_kind),
    Field(description="A folder relative to the recipe file, or `{package, path}`."),
]
Folders = Annotated[
    Annotated[FolderRef, Tag("one")]
    | Annotated[list[FolderRef], Tag("several"), Field(min_length=1)],
    Discriminator(_count_kind),
]


class BoxLabels(Strict):
    """Detection labels: boxes per image, mapped through the image's preprocessing.

    `yolo`: a folder of `.txt` files, one per image at the image's path relative to
    its folder with the suffix `.txt` (`photos/a.png` -> `<path>/a.txt`), each line
    `class cx cy w h` normalised to 0..1; an image without a file has no objects.
    `coco`: one JSON file (`images`, `annotations` with `bbox` `[x, y, w, h]` in
    pixels, `categories`); images match by `file_name`, category ids become 0..K-1
    in ascending id order, and `iscrowd` boxes are left out.
    """

    format: Literal["yolo", "coco"] = Field(description="`yolo` (a folder of `.txt` files) "
                                            "or `coco` (one `.json` file).")
    path: FileRef = Field(description="The YOLO label folder or the COCO JSON file, "
                          "relative to the recipe file, or `{package, path}`.")

    @field_validator("path")
    @classmethod
    def _names_something(cls, path: str | PackageFile) -> str | PackageFile:
        # "" would be the recipe's own folder: no .txt in it, so no box on any image.
        if isinstance(path, str) and not path.strip():
            raise ValueError("labels.path is empty: name the YOLO label folder or the COCO "
                             "JSON file")
        return path


def _labels_kind(value: Any) -> str:
    return "files" if isinstance(value, dict | BoxLabels) else "name"


ImageLabels = Annotated[
    Annotated[Literal["none", "folders"], Tag("name")] | Annotated[BoxLabels, Tag("files")],
    Discriminator(_labels_kind),
    Field(description="`folders`: a class index per image from its sub-folder's name; "
          "`{format: yolo | coco, path}`: detection boxes per image (docs/gates.md)."),
]


class ImageFolder(Sampling):
    """Image files; labels from sub-folder names (`labels: folders`) or label files."""

    kind: Literal["images"]
    path: Folders = Field(
        description="Folder of images (searched recursively), or a list of folders: "
        "their images are used in the order listed, each folder's sorted by path.")
    patterns: list[str] = Field(
        default_factory=lambda: ["*.jpg", "*.jpeg", "*.png"],
        description="Glob patterns of the files to use.",
    )
    labels: ImageLabels = "none"
    preprocess: ImagePreprocess = Field(default_factory=ImagePreprocess)

    @model_validator(mode="after")
    def _folders_once(self) -> ImageFolder:
        seen: list[str | PackageFile] = []
        for index, folder in enumerate(self.folders):
            if folder in seen:
                raise ValueError(f"path[{index}] repeats path[{seen.index(folder)}]")
            seen.append(folder)
        return self

    @property
    def box_labels(self) -> BoxLabels | None:
        """The detection label files, if `labels` declares them."""
        return self.labels if isinstance(self.labels, BoxLabels) else None

    @property
    def folders(self) -> list[str | PackageFile]:
        """`path` as a list, whichever way it was written."""
        return list(self.path) if isinstance(self.path, list) else [self.path]


class IdxFiles(Sampling):
    """MNIST-style IDX files (optionally gzip-compressed)."""

    kind: Literal["idx"]
    images: FileRef
    labels: FileRef | None = None
    preprocess: Normalize = Field(default_factory=Normalize)


class NpzFile(Sampling):
    """A NumPy `.npz` archive: one array per model input, plus optional labels."""

    kind: Literal["npz"]
    path: FileRef
    arrays: dict[str, str] = Field(
        default_factory=dict,
        description="Model input name -> array name in the file; default: input -> `x`.",
    )
    labels: str | None = Field(None, description="Name of the label array, if any.")


class CallableDataset(Sampling):
    """A Python function returning `(inputs, labels)`; see docs/recipes.md, "Datasets"."""

    kind: Literal["callable"]
    function: str = Field(description="`package.module:fn` or `path/to/file.py:fn`.")
    kwargs: dict[str, Any] = Field(default_factory=dict)


DatasetSpec = Annotated[
    ImageFolder | IdxFiles | NpzFile | CallableDataset, Field(discriminator="kind")
]
