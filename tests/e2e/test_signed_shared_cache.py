"""The Fashion-MNIST recipe (prune included) through a signed shared cache: machine A
builds with its own key and uploads; machine B, with an empty cache and another
key, trusts A's public key and reuses every build stage with A's digests (a latency
or accuracy measurement is always its own)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cheap_fashion_copy, edgebuild

pytestmark = [pytest.mark.slow, pytest.mark.distributed]
pytest.importorskip("fsspec", reason="--shared-cache needs fsspec (extra: distributed)")
pytest.importorskip("cryptography", reason="signed shared caches need cryptography")

TARGETS = ("host-cpu", "host-cpu-pruned")
MEASURING = {"infer", "measure-latency"}


def keygen(path: Path) -> Path:
    made = edgebuild("cache", "keygen", "--shared-cache-key", str(path))
    assert made.returncode == 0, made.stdout + made.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    return path.with_suffix(".pub")


def run(recipe: Path, out: Path, cache: Path, *extra: str) -> dict[str, dict[str, Any]]:
    result = edgebuild("run", str(recipe), "--out", str(out), "--cache-dir", str(cache),
                       *extra, cwd=recipe.parent)
    # 1: a gate (a latency budget on a loaded machine); the digests are what is checked.
    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "refusing" not in result.stderr
    return {s["id"]: s for s in json.loads((out / "report.json").read_text())["stages"]}


def test_fashion_mnist_through_a_signed_shared_cache(tmp_path: Path) -> None:
    # The committed recipe's host-cpu and pruned targets, made cheap (one short finetune):
    # what is checked is the digests through the store, not the finetune's accuracy.
    recipe = cheap_fashion_copy(tmp_path, TARGETS)
    team = (tmp_path / "team-cache").as_uri()
    key_a = tmp_path / "a" / "key.pem"
    key_b = tmp_path / "b" / "key.pem"
    public_a = keygen(key_a)
    keygen(key_b)
    first = run(recipe, tmp_path / "out-a", tmp_path / "cache-a", "--shared-cache", team,
                "--shared-cache-key", str(key_a))
    assert {s["op"] for s in first.values()} >= {"prune", "export-onnx", "reference"}
    assert all(s["outcome"] == "built" for s in first.values())  # a local build
    second = run(recipe, tmp_path / "out-b", tmp_path / "cache-b", "--shared-cache", team,
                 "--shared-cache-key", str(key_b), "--shared-cache-trust", str(public_a))
    for sid, stage in second.items():
        if stage["op"] in MEASURING:
            continue
        assert stage["outcome"] == "cached", sid
        assert "from the shared cache" in stage["message"], sid
        assert stage["artifact_digest"] == first[sid]["artifact_digest"], sid
    verify = edgebuild("cache", "verify", "--cache-dir", str(tmp_path / "cache-b"),
                       "--shared-cache-key", str(key_b), "--shared-cache-trust", str(public_a))
    assert verify.returncode == 0, verify.stdout + verify.stderr
