"""Datasets and model files travel to a remote stage by content (execute/remote/carry.py,
execute/remote/far_side.py): every path the spec names is rewritten under `carried/`, the
files arrive checked against their digests, and relative paths resolve as on the client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.core.digest import digest_file
from edgebuild.errors import CacheCorrupt
from edgebuild.execute.remote.carry import carry, check_modules
from edgebuild.execute.remote.far_side import task_files, unpack


def spec_for(project: Path, datasets: dict[str, Any], source: dict[str, Any] | None,
             inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"recipe_dir": str(project), "datasets": datasets, "source": source,
            "inputs": inputs or {}}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "client" / "project"
    (root / "photos" / "cats").mkdir(parents=True)
    (root / "more").mkdir()
    for name in ("a.png", "b.jpg"):
        (root / "photos" / "cats" / name).write_bytes(name.encode() * 10)
    (root / "more" / "c.png").write_bytes(b"c" * 10)
    (root / "notes.txt").write_text("not an image")
    np.savez(root / "set.npz", x=np.zeros((2, 4), np.float32))
    (root / "images.gz").write_bytes(b"idx images")
    (root / "labels.gz").write_bytes(b"idx labels")
    (root / "make.py").write_text("def build():\n    return 1\n")
    (root / "weights.pt").write_bytes(b"weights")
    return root


def test_every_dataset_kind_and_the_model_source_are_carried(project: Path,
                                                             tmp_path: Path) -> None:
    datasets = {
        "photos": {"kind": "images", "path": ["photos", str(project / "more")]},
        "one": {"kind": "images", "path": "photos"},
        "idx": {"kind": "idx", "images": str(project / "images.gz"), "labels": "labels.gz"},
        "npz": {"kind": "npz", "path": "set.npz"},
        "fn": {"kind": "callable", "function": "make.py:build"},
        "module": {"kind": "callable", "function": "json:loads"},
    }
    out = carry(spec_for(project, datasets,
                         {"factory": "make.py:build", "weights": "weights.pt"}))
    sets = out.spec["datasets"]
    assert sets["photos"]["path"] == ["carried/datasets/photos/0", "carried/datasets/photos/1"]
    assert sets["one"]["path"] == "carried/datasets/one/0"
    # Names are kept: the IDX reader decides gzip from `.gz`.
    assert sets["idx"]["images"] == "carried/datasets/idx/images/images.gz"
    assert sets["idx"]["labels"] == "carried/datasets/idx/labels/labels.gz"
    assert sets["npz"]["path"] == "carried/datasets/npz/set.npz"
    assert sets["fn"]["function"] == "carried/datasets/fn/make.py:build"
    assert sets["module"]["function"] == "json:loads"  # the worker's own installed copy…
    assert "json" in out.expect_modules  # …checked against the client's
    assert out.spec["source"] == {"factory": "carried/model/make.py:build",
                                  "weights": "carried/model/weights.pt"}
    assert "carried/datasets/photos/0/cats/a.png" in out.files
    assert "carried/datasets/photos/1/c.png" in out.files
    assert not any(rel.endswith("notes.txt") for rel in out.files)  # only what is read
    for digest, path in out.files.values():
        assert digest == digest_file(path)

    # On the "worker": only the carried bytes, under another folder.
    worker = tmp_path / "worker"
    unpack({dest: (digest, path.read_bytes())
            for dest, (digest, path) in task_files(out.spec, out.files).items()}, worker)
    from edgebuild.data.digest import image_files
    from edgebuild.recipe.datasets import ImageFolder

    images = image_files(ImageFolder.model_validate(sets["photos"]), worker / "recipe")
    assert [i.name for i in images] == ["0/cats/a.png", "0/cats/b.jpg", "1/c.png"]
    assert (worker / "recipe" / sets["idx"]["labels"]).read_bytes() == b"idx labels"
    assert check_modules(out.expect_modules, worker / "recipe") == ""


def test_input_artifacts_travel_and_damage_is_refused(project: Path, tmp_path: Path) -> None:
    model = project / "weights.pt"
    inputs = {"model": {"path": str(project), "files": {"weights.pt": digest_file(model)}}}
    files = task_files(spec_for(project, {}, None, inputs), {})
    assert files == {"inputs/model/weights.pt": (digest_file(model), model)}
    with pytest.raises(CacheCorrupt, match="arrived damaged"):
        unpack({"inputs/model/weights.pt": (digest_file(model), b"other bytes")},
               tmp_path / "w1")
    with pytest.raises(CacheCorrupt, match="outside the task folder"):
        unpack({"../escape": (digest_file(model), b"weights")}, tmp_path / "w2")


def test_a_module_that_differs_on_the_worker_is_named(tmp_path: Path) -> None:
    assert "differs from the client's" in check_modules({"json": "0" * 64}, tmp_path)
    assert "not importable" in check_modules({"no_such_pkg.mod": "0" * 64}, tmp_path)


def test_a_carried_gzip_idx_file_still_reads(tmp_path: Path) -> None:
    """The IDX reader knows gzip by the `.gz` name: carrying must keep it."""
    import gzip
    import struct

    from edgebuild.data.loaders import read_idx

    project = tmp_path / "project"
    project.mkdir()
    images = np.arange(8, dtype=np.uint8).reshape(2, 2, 2)
    raw = struct.pack(">I", 0x0803) + struct.pack(">III", 2, 2, 2) + images.tobytes()
    (project / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(raw))
    out = carry(spec_for(project, {"idx": {"kind": "idx",
                                           "images": "t10k-images-idx3-ubyte.gz"}}, None))
    worker = tmp_path / "worker"
    unpack({dest: (digest, path.read_bytes())
            for dest, (digest, path) in task_files(out.spec, out.files).items()}, worker)
    carried = worker / "recipe" / out.spec["datasets"]["idx"]["images"]
    assert np.array_equal(read_idx(carried), images)
