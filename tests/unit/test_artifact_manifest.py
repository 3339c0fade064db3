"""The artifact manifest (core/manifest.py) as written (run/artifacts.py) and as read back
from a baseline build: untrusted input, so every way it can be wrong is a clear error
naming the file (and key), never a traceback and never a file read from outside."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from edgebuild.core.artifact import Artifact
from edgebuild.core.manifest import (
    MANIFEST_NAME,
    ArtifactManifest,
    read_manifest,
    verified_files,
)
from edgebuild.errors import EdgebuildError, ExitCode
from edgebuild.report.baseline import baseline_artifacts
from edgebuild.report.model import Report, TargetReport
from edgebuild.run.artifacts import export_target

PROFILE = {"name": "host-cpu", "description": "test", "backend": "onnxruntime",
           "device": {"kind": "cpu", "arch": "x86_64", "name": "test"}}
MODEL = b"not really onnx, but bytes with a digest"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_data(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "edgebuild_version": "0.1.0", "created": "2026-01-01T00:00:00+00:00",
        "recipe": "tiny", "target": "host-cpu", "profile": PROFILE,
        "backend": "onnxruntime", "backend_version": 2, "tools": {"onnxruntime": "1"},
        "precision": "fp32", "builds_on_device": False, "stage": "compile@host-cpu",
        "stage_key": "a" * 64, "format": "onnx", "main": "model.onnx",
        "files": [{"name": "model.onnx", "sha256": sha(MODEL), "size": len(MODEL)}],
        "gates": [{"gate": "latency", "status": "passed", "passed": True,
                   "measured": {"p50_ms": 0.1}, "limits": {"budget_ms": 1.0}}],
        "passed": True}
    data.update(changes)
    return data


def build_folder(root: Path, **changes: Any) -> Path:
    """A baseline --out folder: report.json and artifacts/host-cpu/{model.onnx,manifest}."""
    folder = root / "artifacts" / "host-cpu"
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(MODEL)
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest_data(**changes)))
    report = Report(recipe="tiny", recipe_file="tiny.yaml", edgebuild_version="0.1.0",
                    started="", seconds=0, exit_code=0, stages=[], counts={},
                    targets=[TargetReport(name="host-cpu", profile="host-cpu",
                                          backend="onnxruntime", format="onnx",
                                          artifact="artifacts/host-cpu/model.onnx")])
    (root / "report.json").write_text(report.model_dump_json())
    return folder


def refused(path: Path) -> EdgebuildError:
    with pytest.raises(EdgebuildError) as caught:
        baseline_artifacts(path)
    assert caught.value.exit_code is ExitCode.USAGE
    return caught.value


def test_a_checked_baseline_gives_its_manifest_and_digest(tmp_path: Path) -> None:
    folder = build_folder(tmp_path)
    found = baseline_artifacts(tmp_path / "report.json")
    manifest = folder / MANIFEST_NAME
    assert found == {"host-cpu": {"manifest": str(manifest.resolve()),
                                  "digest": sha(manifest.read_bytes())}}
    parsed = read_manifest(manifest)
    assert parsed.device.arch == "x86_64" and parsed.size_bytes == len(MODEL)
    assert verified_files(folder, parsed) == {"model.onnx": folder / "model.onnx"}


def test_a_build_from_before_the_manifest_asks_for_a_rebuild(tmp_path: Path) -> None:
    folder = build_folder(tmp_path)
    (folder / MANIFEST_NAME).unlink()
    error = refused(tmp_path / "report.json")
    assert str(folder / MANIFEST_NAME) in error.message and "no manifest" in error.message
    assert "rebuild the baseline" in error.hint


def test_another_backends_baseline_is_left_out(tmp_path: Path) -> None:
    build_folder(tmp_path)
    assert baseline_artifacts(tmp_path / "report.json", {"host-cpu": "openvino"}) == {}


@pytest.mark.parametrize(("changes", "said"), [
    ({"files": [{"name": "model.onnx", "sha256": "0" * 64, "size": len(MODEL)}]},
     "does not match its recorded size and sha256"),
    ({"files": [{"name": "model.onnx", "sha256": sha(MODEL), "size": 1}]},
     "does not match its recorded size and sha256"),
    ({"files": [{"name": "../../report.json", "sha256": "0" * 64, "size": 1}],
      "main": "../../report.json"}, "not a plain relative path"),
    ({"files": [{"name": "/etc/passwd", "sha256": "0" * 64, "size": 1}],
      "main": "/etc/passwd"}, "not a plain relative path"),
    ({"files": [{"name": "gone.onnx", "sha256": "0" * 64, "size": 1}], "main": "gone.onnx"},
     "file gone.onnx is missing"),
    ({"target": "other"}, "describes target 'other'"),
    ({"main": "elsewhere.onnx"}, "main 'elsewhere.onnx' is not one of the files"),
    ({"stage_key": "short"}, "key stage_key: String should match pattern"),
    ({"files": [{"name": "model.onnx", "sha256": sha(MODEL), "size": 1, "x": 1}]},
     "key files.0.x: Extra inputs are not permitted"),
    ({"schema_version": 7}, "manifest schema 7 is newer than this edgebuild's (1)"),
])
def test_a_bad_manifest_is_a_usage_error_naming_file_and_key(
        tmp_path: Path, changes: dict[str, Any], said: str) -> None:
    build_folder(tmp_path, **changes)
    error = refused(tmp_path / "report.json")
    assert str(tmp_path / "artifacts" / "host-cpu" / MANIFEST_NAME) in error.message
    assert said in error.message, error.message


def test_a_manifest_that_is_not_json_is_refused(tmp_path: Path) -> None:
    folder = build_folder(tmp_path)
    (folder / MANIFEST_NAME).write_text("{not json")
    assert "not a readable JSON manifest" in refused(tmp_path / "report.json").message


def test_a_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.onnx"
    secret.write_bytes(MODEL)
    folder = build_folder(tmp_path)
    (folder / "model.onnx").unlink()
    (folder / "model.onnx").symlink_to(secret)
    assert "is not inside" in refused(tmp_path / "report.json").message


def test_export_writes_files_and_manifest_and_replaces_the_old_folder(tmp_path: Path) -> None:
    store = tmp_path / "entry"
    (store / "sub").mkdir(parents=True)
    (store / "model.onnx").write_bytes(MODEL)
    (store / "sub" / "weights.bin").write_bytes(b"w")
    files = {"model.onnx": sha(MODEL), "sub/weights.bin": sha(b"w")}
    compiled = Artifact("a" * 64, "onnx", store, files, {"model.onnx": len(MODEL),
                                                         "sub/weights.bin": 1},
                        {"main": "model.onnx", "stage": "compile@host-cpu"})
    manifest = ArtifactManifest.model_validate(manifest_data(files=[
        {"name": n, "sha256": d, "size": compiled.sizes[n]} for n, d in files.items()]))
    out = tmp_path / "out"
    stale = out / "artifacts" / "host-cpu"
    stale.mkdir(parents=True)
    (stale / "old.tflite").write_bytes(b"old")
    assert export_target(out, "host-cpu", compiled, manifest) == "artifacts/host-cpu/model.onnx"
    assert sorted(p.name for p in (out / "artifacts").iterdir()) == ["host-cpu"]
    assert sorted(p.relative_to(stale).as_posix() for p in stale.rglob("*") if p.is_file()) \
        == [MANIFEST_NAME, "model.onnx", "sub/weights.bin"]
    assert read_manifest(stale / MANIFEST_NAME) == manifest
    assert verified_files(stale, manifest).keys() == files.keys()
    # Nothing built this time: the folder goes, and no hidden staging folder stays.
    assert export_target(out, "host-cpu", None, None) is None
    assert list((out / "artifacts").iterdir()) == []


def _compiled(tmp_path: Path) -> tuple[Artifact, ArtifactManifest]:
    entry = tmp_path / "entry"
    (entry / "sub").mkdir(parents=True)
    (entry / "model.onnx").write_bytes(MODEL)
    (entry / "sub" / "weights.bin").write_bytes(b"w")
    files = {"model.onnx": sha(MODEL), "sub/weights.bin": sha(b"w")}
    compiled = Artifact("a" * 64, "onnx", entry, files, {"model.onnx": len(MODEL),
                                                         "sub/weights.bin": 1},
                        {"main": "model.onnx", "stage": "compile@host-cpu"})
    manifest = ArtifactManifest.model_validate(manifest_data(files=[
        {"name": n, "sha256": d, "size": compiled.sizes[n]} for n, d in files.items()]))
    return compiled, manifest


def test_a_rerun_keeps_unchanged_exported_files_and_rewrites_the_manifest(
        tmp_path: Path) -> None:
    compiled, manifest = _compiled(tmp_path)
    out, cache = tmp_path / "out", tmp_path / "cache"
    folder = out / "artifacts" / "host-cpu"
    export_target(out, "host-cpu", compiled, manifest, cache)
    inode = (folder / "model.onnx").stat().st_ino
    later = manifest.model_copy(update={"created": "2026-02-02T00:00:00+00:00"})
    assert export_target(out, "host-cpu", compiled, later, cache) == \
        "artifacts/host-cpu/model.onnx"
    assert (folder / "model.onnx").stat().st_ino == inode  # not copied again
    assert read_manifest(folder / MANIFEST_NAME) == later
    assert sorted(p.name for p in (out / "artifacts").iterdir()) == ["host-cpu"]
    assert sorted(p.name for p in folder.iterdir()) == [MANIFEST_NAME, "model.onnx", "sub"]
    # Without the cache's record, the folder is replaced as always.
    export_target(out, "host-cpu", compiled, later)
    assert (folder / "model.onnx").stat().st_ino != inode


@pytest.mark.parametrize("change", ["edit", "extra", "replace"])
def test_an_exported_file_changed_since_is_copied_again(tmp_path: Path, change: str) -> None:
    import os

    compiled, manifest = _compiled(tmp_path)
    out, cache = tmp_path / "out", tmp_path / "cache"
    folder = out / "artifacts" / "host-cpu"
    export_target(out, "host-cpu", compiled, manifest, cache)
    model = folder / "model.onnx"
    if change == "edit":  # same size, its modification time set back: the change time moves
        before = model.stat()
        model.write_bytes(MODEL.upper())
        os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif change == "extra":
        (folder / "sub" / "stray.bin").write_bytes(b"x")
    else:
        fresh = folder / "fresh"
        fresh.write_bytes(MODEL.upper())
        fresh.replace(model)
    export_target(out, "host-cpu", compiled, manifest, cache)
    assert verified_files(folder, manifest).keys() == {"model.onnx", "sub/weights.bin"}
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) \
        == [MANIFEST_NAME, "model.onnx", "sub/weights.bin"]
