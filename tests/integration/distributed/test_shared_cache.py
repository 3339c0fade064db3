"""A shared store (--shared-cache, any fsspec URL; a folder here): a second machine
(another local cache) reuses what the first built, measurements excepted, and a
damaged shared entry is refused and rebuilt, never used."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import edgebuild

pytest.importorskip("fsspec", reason="--shared-cache needs fsspec (extra: distributed)")
pytestmark = pytest.mark.distributed


def stages(out: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    return {s["id"]: s for s in json.loads((out / "report.json").read_text())["stages"]}


def run(recipe: Path, out: Path, cache: Path, shared: str) -> dict[str, dict]:  # type: ignore[type-arg]
    result = edgebuild("run", str(recipe), "--out", str(out), "--cache-dir", str(cache),
                       "--shared-cache", shared)
    assert result.returncode == 0, result.stdout + result.stderr
    return stages(out)


@pytest.mark.slow
def test_a_second_machine_reuses_the_shared_store(tiny_project: Callable[..., Path],
                                                  tmp_path: Path) -> None:
    recipe = tiny_project()
    shared = (tmp_path / "team-cache").as_uri()  # file:///…
    first = run(recipe, tmp_path / "a", tmp_path / "machine-a", shared)
    assert all(s["outcome"] == "built" for s in first.values())
    second = run(recipe, tmp_path / "b", tmp_path / "machine-b", shared)
    measuring = {"infer", "measure-latency"}
    for sid, stage in second.items():
        if stage["op"] in measuring:  # a measurement belongs to the machine that made it
            assert stage["outcome"] == "built", sid
        else:
            assert stage["outcome"] == "cached", sid
            assert "from the shared cache" in stage["message"]
            assert stage["artifact_digest"] == first[sid]["artifact_digest"]
    shared_ops = {json.loads(m.read_text())["metadata"]["op"]
                  for m in (tmp_path / "team-cache").rglob("artifact.json")}
    assert shared_ops == {s["op"] for s in first.values()} - measuring


@pytest.mark.slow
def test_a_damaged_shared_entry_is_refused(tiny_project: Callable[..., Path],
                                           tmp_path: Path) -> None:
    recipe = tiny_project()
    team = tmp_path / "team-cache"
    first = run(recipe, tmp_path / "a", tmp_path / "machine-a", str(team))
    optimized = first["onnx-optimize"]["key"]
    entry = team / "objects" / optimized[:2] / optimized
    model = next(p for p in entry.iterdir() if p.suffix == ".onnx")
    model.write_bytes(model.read_bytes()[:-10] + b"0123456789")
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "b"), "--cache-dir",
                       str(tmp_path / "machine-b"), "--shared-cache", str(team))
    assert result.returncode == 0, result.stdout + result.stderr
    second = stages(tmp_path / "b")
    assert second["onnx-optimize"]["outcome"] == "built"  # refused, rebuilt here
    assert second["onnx-optimize"]["artifact_digest"] == first["onnx-optimize"][
        "artifact_digest"]
    assert "does not match its manifest's digests" in result.stderr
