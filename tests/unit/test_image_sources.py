"""An `images` dataset drawn from several folders: order, digest, errors, odd image modes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydantic import TypeAdapter, ValidationError

from edgebuild.cache.digest import StatCache
from edgebuild.data.digest import dataset_digest, image_files
from edgebuild.data.loaders import load_dataset
from edgebuild.errors import DataError, RecipeError
from edgebuild.recipe.datasets import DatasetSpec, ImageFolder
from edgebuild.recipe.loader import load_recipe

PRE = {"resize": 16, "center_crop": 16, "mean": [127], "std": [128]}


def spec(**fields: object) -> ImageFolder:
    parsed = TypeAdapter(DatasetSpec).validate_python({"kind": "images", **fields})
    assert isinstance(parsed, ImageFolder)
    return parsed


def photo(path: Path, value: int, mode: str = "RGB", size: tuple[int, int] = (20, 16)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    color: object = value if mode in ("L", "P", "I;16") else (value,) * len(mode)
    Image.new(mode, size, color).save(path)  # type: ignore[arg-type]


@pytest.fixture
def two_folders(tmp_path: Path) -> Path:
    photo(tmp_path / "b" / "z.png", 10)
    photo(tmp_path / "b" / "a.jpg", 20)
    photo(tmp_path / "a" / "y.png", 30)
    photo(tmp_path / "a" / "sub" / "x.png", 40)
    return tmp_path


def test_one_folder_and_a_list_of_one_mean_the_same(tmp_path: Path) -> None:
    photo(tmp_path / "a" / "x.png", 1)
    one, listed = spec(path="a"), spec(path=["a"])
    assert one.folders == listed.folders == ["a"]
    assert [f.name for f in image_files(one, tmp_path)] == ["x.png"]
    assert [f.name for f in image_files(listed, tmp_path)] == ["0/x.png"]


def test_folders_in_listed_order_files_sorted_within(two_folders: Path) -> None:
    files = image_files(spec(path=["b", "a"]), two_folders)
    assert [f.name for f in files] == ["0/a.jpg", "0/z.png", "1/sub/x.png", "1/y.png"]
    samples = load_dataset(spec(path=["b", "a"], preprocess=PRE), two_folders, ["x"])
    assert samples.names == [f.name for f in files]
    # (value - 127) / 128 per image, in the listed order (JPEG is lossy: approx)
    firsts = samples.inputs["x"][:, 0, 8, 8] * 128 + 127
    assert firsts == pytest.approx([20, 10, 40, 30], abs=2)


def test_order_is_deterministic_and_limit_samples_across_folders(two_folders: Path) -> None:
    ds = spec(path=["b", "a"], limit=3, seed=1, preprocess=PRE)
    first = load_dataset(ds, two_folders, ["x"])
    again = load_dataset(ds, two_folders, ["x"])
    assert first.names == again.names and len(first) == 3
    assert np.array_equal(first.inputs["x"], again.inputs["x"])


def test_overlapping_folders_keep_each_file_once(two_folders: Path) -> None:
    names = [f.name for f in image_files(spec(path=["a/sub", "a"]), two_folders)]
    assert names == ["0/x.png", "1/y.png"]


def test_package_folder_mixed_with_a_path(tmp_path: Path) -> None:
    photo(tmp_path / "mine" / "m.png", 5)
    ds = spec(path=[{"package": "skimage", "path": "data"}, "mine"], patterns=["*.png"])
    files = image_files(ds, tmp_path)
    assert files[-1].name == "1/m.png"
    assert all(f.name.startswith("0/") for f in files[:-1]) and len(files) > 10


def test_labels_from_folders_across_sources(tmp_path: Path) -> None:
    photo(tmp_path / "s1" / "cat" / "1.png", 1)
    photo(tmp_path / "s2" / "dog" / "2.png", 2)
    photo(tmp_path / "s2" / "cat" / "3.png", 3)
    samples = load_dataset(spec(path=["s1", "s2"], labels="folders", preprocess=PRE),
                           tmp_path, ["x"])
    assert samples.labels is not None
    assert list(samples.labels) == [0, 0, 1]  # cat, cat, dog: one class per folder name


@pytest.mark.parametrize("mode", ["L", "LA", "RGBA", "P", "CMYK", "I;16"])
def test_odd_image_modes_become_rgb(tmp_path: Path, mode: str) -> None:
    value = 200 * 257 if mode == "I;16" else 200
    photo(tmp_path / "odd" / "img.png" if mode != "CMYK" else tmp_path / "odd" / "img.jpg",
          value, mode)
    samples = load_dataset(spec(path="odd", preprocess=PRE), tmp_path, ["x"])
    x = samples.inputs["x"]
    assert x.shape == (1, 3, 16, 16) and x.dtype == np.float32
    if mode in ("L", "LA", "RGBA", "I;16"):
        assert x[0, :, 8, 8] == pytest.approx([(200 - 127) / 128] * 3, abs=1e-6)


def test_digest_changes_when_any_file_in_any_folder_changes(two_folders: Path) -> None:
    ds = spec(path=["b", "a"])
    stats = StatCache(two_folders / "stats.json")
    first = dataset_digest(ds, two_folders, stats)
    assert dataset_digest(ds, two_folders, stats) == first
    photo(two_folders / "a" / "sub" / "x.png", 41)  # edit a file in the second folder
    edited = dataset_digest(ds, two_folders, stats)
    assert edited != first
    photo(two_folders / "a" / "new.png", 50)  # add one
    added = dataset_digest(ds, two_folders, stats)
    assert added != edited
    (two_folders / "b" / "z.png").rename(two_folders / "b" / "w.png")  # rename one
    assert dataset_digest(ds, two_folders, stats) != added
    assert dataset_digest(spec(path=["a", "b"]), two_folders, stats) != \
        dataset_digest(ds, two_folders, stats)  # the order is part of the key


def test_single_folder_digest_is_unchanged_by_the_list_form(tmp_path: Path) -> None:
    """A recipe written before lists existed keeps its cache keys."""
    photo(tmp_path / "a" / "x.png", 1)
    ds = spec(path="a")
    assert ds.model_dump(mode="json")["path"] == "a"
    stats = StatCache(tmp_path / "stats.json")
    from edgebuild.core.digest import digest_json

    before = {k: v for k, v in ds.model_dump(mode="json").items()
              if k != "stream"}  # the spec as written before streams (left out unset)
    expected = digest_json({"spec": before,
                            "files": [["x.png", stats.digest(tmp_path / "a" / "x.png")]]})
    assert dataset_digest(ds, tmp_path, stats) == expected


def test_missing_or_empty_folder_names_its_list_entry(two_folders: Path) -> None:
    with pytest.raises(DataError, match=r"dataset 'photos': path\[1\]: image folder .*nope "
                                        r"does not exist") as info:
        load_dataset(spec(path=["a", "nope"]), two_folders, ["x"], "photos")
    assert "relative to the recipe" in info.value.hint
    (two_folders / "empty").mkdir()
    with pytest.raises(DataError, match=r"path\[0\]: image folder .*empty has no files"):
        image_files(spec(path=["empty", "a"]), two_folders)
    with pytest.raises(DataError, match=r"path\[1\]: package 'no_such_pkg' is not installed"):
        image_files(spec(path=["a", {"package": "no_such_pkg", "path": "d"}]), two_folders)


def test_schema_rejects_empty_and_repeated_lists() -> None:
    with pytest.raises(ValidationError, match="at least 1 item"):
        spec(path=[])
    with pytest.raises(ValidationError, match=r"path\[2\] repeats path\[0\]"):
        spec(path=["a", "b", "a"])


RECIPE = """\
name: demo
model: {onnx: m.onnx}
inputs:
  - {name: x, shape: [1, 3, 16, 16]}
datasets:
  photos:
    kind: images
    path:
      - a
      - {packge: skimage, path: data}
targets:
  host-cpu:
    gates:
      latency: {budget_ms: 5}
"""


def test_typo_in_a_list_entry_points_at_that_entry(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe)
    problems = [str(p) for p in info.value.problems]
    assert problems and all("r.yaml:10:" in p for p in problems)
    assert any("unknown key 'packge'" in p and "datasets.photos.path.1.packge" in p
               for p in problems)
