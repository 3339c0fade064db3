"""Datasets load from every declared kind, preprocess as declared, and sample deterministically."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydantic import TypeAdapter

from edgebuild.cache.digest import StatCache
from edgebuild.data.digest import dataset_digest
from edgebuild.data.loaders import choose, load_dataset, read_idx
from edgebuild.errors import DataError
from edgebuild.recipe.datasets import DatasetSpec


def spec(**fields: object) -> DatasetSpec:
    parsed: DatasetSpec = TypeAdapter(DatasetSpec).validate_python(fields)
    return parsed


def write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        d.to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


def test_idx_round_trip_and_normalisation(tmp_path: Path) -> None:
    images = np.arange(5 * 4 * 4, dtype=np.uint8).reshape(5, 4, 4)
    write_idx(tmp_path / "x.gz", images)
    write_idx(tmp_path / "y.gz", np.array([0, 1, 2, 3, 4]))
    assert np.array_equal(read_idx(tmp_path / "x.gz"), images)
    ds = spec(kind="idx", images="x.gz", labels="y.gz",
              preprocess={"scale": 0.5, "mean": [1.0], "std": [2.0]})
    samples = load_dataset(ds, tmp_path, ["image"])
    x = samples.inputs["image"]
    assert x.shape == (5, 1, 4, 4) and x.dtype == np.float32
    assert x[0, 0, 0, 1] == pytest.approx((1 * 0.5 - 1.0) / 2.0)
    assert list(samples.labels) == [0, 1, 2, 3, 4]  # type: ignore[arg-type]


def test_image_folder_resize_crop_layout(tmp_path: Path) -> None:
    folder = tmp_path / "imgs"
    (folder / "cat").mkdir(parents=True)
    (folder / "dog").mkdir()
    Image.new("RGB", (40, 30), (255, 0, 0)).save(folder / "cat" / "a.png")
    Image.new("L", (30, 50), 128).save(folder / "dog" / "b.png")
    ds = spec(kind="images", path="imgs", labels="folders",
              preprocess={"resize": 24, "center_crop": 20, "mean": [127], "std": [128]})
    samples = load_dataset(ds, tmp_path, ["image"])
    x = samples.inputs["image"]
    assert x.shape == (2, 3, 20, 20)
    assert x[0, 0, 10, 10] == pytest.approx((255 - 127) / 128)  # red channel first (RGB)
    assert x[0, 1, 10, 10] == pytest.approx(-127 / 128)
    assert list(samples.labels) == [0, 1]  # type: ignore[arg-type]


def test_npz_with_labels_and_limit(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", x=np.arange(20, dtype=np.float32).reshape(10, 2),
             y=np.arange(10))
    ds = spec(kind="npz", path="d.npz", labels="y", limit=4, seed=3)
    samples = load_dataset(ds, tmp_path, ["inp"])
    assert samples.inputs["inp"].shape == (4, 2)
    assert list(samples.inputs["inp"][:, 0] // 2) == list(samples.labels)  # type: ignore[arg-type]


def test_callable_dataset(tmp_path: Path) -> None:
    (tmp_path / "gen.py").write_text(
        "import numpy as np\n"
        "def make(n):\n    return np.ones((n, 3), np.float32), np.zeros(n, np.int64)\n")
    samples = load_dataset(spec(kind="callable", function="gen.py:make", kwargs={"n": 7}),
                           tmp_path, ["x"])
    assert len(samples) == 7 and samples.inputs["x"].shape == (7, 3)


def test_sampling_is_deterministic_and_sorted() -> None:
    a = choose(1000, 50, seed=1)
    assert np.array_equal(a, choose(1000, 50, seed=1))
    assert not np.array_equal(a, choose(1000, 50, seed=2))
    assert np.all(np.diff(a) > 0)
    assert len(choose(10, 50, seed=0)) == 10


def test_empty_and_missing_data_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"dataset 'photos'.*no files matching"):
        load_dataset(spec(kind="images", path="empty"), tmp_path, ["x"], "photos")
    with pytest.raises(DataError, match="array 'z' not in the file"):
        np.savez(tmp_path / "d.npz", x=np.zeros((2, 2)))
        load_dataset(spec(kind="npz", path="d.npz", arrays={"x": "z"}), tmp_path, ["x"])


def test_digest_follows_content(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", x=np.zeros(3))
    ds = spec(kind="npz", path="d.npz")
    stats = StatCache(tmp_path / "stats.json")
    first = dataset_digest(ds, tmp_path, stats)
    assert dataset_digest(ds, tmp_path, stats) == first
    np.savez(tmp_path / "d.npz", x=np.ones(3))
    assert dataset_digest(ds, tmp_path, stats) != first
    assert dataset_digest(spec(kind="npz", path="d.npz", limit=2), tmp_path, stats) != first
