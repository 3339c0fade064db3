"""Issue 28.1, reproduced through the real CLI: a cache entry for `prune` whose file
unpickles to code, with digests that match (whoever can write a store can write its
manifest too). The next stage refuses it and the attacker's code never runs.

The entry is planted in the local store of a second machine (an empty cache that
received `prune` from elsewhere), so the test holds whatever a shared store checks
before it hands an entry over."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from edgebuild.core.digest import digest_file
from edgebuild.passes.pruned_torch import WEIGHTS_FILE
from tests.conftest import REPO, edgebuild
from tests.integration.passes.test_prune import evil_pickle

pytest.importorskip("torch_pruning", reason="the prune pass needs torch-pruning")
pytestmark = pytest.mark.slow

FASHION = Path("/usr/share/datasets/fashion-mnist")

RECIPE = f"""\
name: pruned-tiny
model:
  factory: {REPO}/recipes/models/fashion_mnist_cnn.py:build
  weights: {REPO}/recipes/models/fashion_mnist_cnn.pt
inputs:
  - {{name: image, shape: [1, 1, 28, 28], dtype: float32}}
outputs: [logits]
datasets:
  test:
    kind: idx
    images: {FASHION}/t10k-images-idx3-ubyte.gz
    labels: {FASHION}/t10k-labels-idx1-ubyte.gz
    limit: 100
    preprocess: {{scale: 0.00392156862745098, mean: [0.2860], std: [0.3530]}}
passes:
  - prune: {{ratio: 0.25, round_to: 8}}
  - export-onnx: {{opset: 17}}
targets:
  host-cpu:
    gates:
      accuracy: {{dataset: test, min_top1: 50.0}}
      size: {{max_mb: 1}}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The recipe built once (machine A): its folder and prune's cache key."""
    if not FASHION.is_dir():
        pytest.skip("needs the Debian package dataset-fashion-mnist (scripts/setup.sh)")
    root = tmp_path_factory.mktemp("machine-a")
    (root / "pruned.yaml").write_text(RECIPE)
    result = edgebuild("run", str(root / "pruned.yaml"), "--out", str(root / "out"),
                       "--cache-dir", str(root / "cache"), cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((root / "out" / "report.json").read_text())
    (key,) = [s["key"] for s in report["stages"] if s["op"] == "prune"]
    return root, key


def plant(built: tuple[Path, str], cache: Path, files: dict[str, bytes],
          main: str | None = None) -> None:
    """Machine B's cache: only prune's entry, with `files` swapped in and a manifest
    whose digests and sizes match them."""
    root, key = built
    entry = cache / "objects" / key[:2] / key
    shutil.copytree(root / "cache" / "objects" / key[:2] / key, entry)
    manifest = json.loads((entry / "artifact.json").read_text())
    for name, data in files.items():
        (entry / name).write_bytes(data)
    if main is not None:
        for name in list(manifest["files"]):
            (entry / name).unlink()
        manifest["files"], manifest["sizes"] = {}, {}
        manifest["metadata"]["main"] = main
    for name in files:
        manifest["files"][name] = digest_file(entry / name)
        manifest["sizes"][name] = (entry / name).stat().st_size
    (entry / "artifact.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(("poison", "refusal"), [
    ("pickled-module", "refusing the pruned model 'model.pt'"),  # today's format, swapped
    ("pickled-weights", f"refusing the pruned weights {WEIGHTS_FILE}: not a state dict"),
])
def test_a_poisoned_prune_entry_is_refused_and_runs_nothing(
        built: tuple[Path, str], tmp_path: Path, poison: str, refusal: str) -> None:
    marker = tmp_path / "attacker-was-here"
    if poison == "pickled-module":
        plant(built, tmp_path / "cache", {"model.pt": evil_pickle(marker)}, main="model.pt")
    else:
        plant(built, tmp_path / "cache", {WEIGHTS_FILE: evil_pickle(marker)})
    root, _ = built
    result = edgebuild("run", str(root / "pruned.yaml"), "--out", str(tmp_path / "out"),
                       "--cache-dir", str(tmp_path / "cache"), cwd=root)
    output = result.stdout + result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    stages = {s["op"]: s for s in report["stages"]}
    assert stages["prune"]["cached"], output  # the planted entry was the one used
    assert stages["export-onnx"]["outcome"] == "failed", output
    assert refusal in stages["export-onnx"]["message"]
    assert result.returncode == 3, output
    assert "Traceback" not in result.stdout
    assert not marker.exists()


def test_the_genuine_entry_is_used_as_is(built: tuple[Path, str], tmp_path: Path) -> None:
    """The control: the same entry, unchanged, builds machine B's run from the cache."""
    plant(built, tmp_path / "cache", {})
    root, _ = built
    result = edgebuild("run", str(root / "pruned.yaml"), "--out", str(tmp_path / "out"),
                       "--cache-dir", str(tmp_path / "cache"), cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    stages = {s["op"]: s for s in report["stages"]}
    assert stages["prune"]["cached"] and stages["export-onnx"]["outcome"] == "built"
    a = json.loads((root / "out" / "report.json").read_text())
    assert {s["op"]: s["artifact_digest"] for s in a["stages"]} == \
        {op: s["artifact_digest"] for op, s in stages.items()}
