"""Cache keys change exactly when an input changes; the store never serves a bad entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from edgebuild.cache.keys import stage_key
from edgebuild.cache.store import Store

BASE: dict[str, Any] = {
    "op": "onnx-optimize", "op_version": 1, "params": {"simplifier": "onnxslim"},
    "inputs": {"model": "a" * 64}, "datasets": {"d": "b" * 64}, "source": None,
    "custom_ops": None, "io": {"inputs": [{"name": "x"}]}, "target": None, "backend": None,
    "tools": ("onnx",),
}


def test_key_is_full_sha256_and_stable() -> None:
    key = stage_key(**BASE)
    assert len(key) == 64 and int(key, 16) >= 0
    assert stage_key(**BASE) == key
    assert stage_key(**{**BASE, "params": {"simplifier": "onnxslim"}}) == key  # order-free


@pytest.mark.parametrize("field,value", [
    ("op", "export-onnx"), ("op_version", 2), ("params", {"simplifier": "none"}),
    ("inputs", {"model": "c" * 64}), ("datasets", {"d": "d" * 64}), ("source", "e" * 64),
    ("custom_ops", "9" * 64), ("io", {"inputs": [{"name": "y"}]}), ("target", "f" * 64),
    ("tools", ("onnx", "torch")),
    ("backend", {"name": "onnxruntime", "version": 2}),
])
def test_key_changes_when_any_input_changes(field: str, value: Any) -> None:
    assert stage_key(**{**BASE, field: value}) != stage_key(**BASE)


def test_key_changes_with_tool_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from edgebuild.cache import keys

    before = stage_key(**BASE)
    monkeypatch.setattr(keys, "tool_version", lambda name: "999.0")
    assert stage_key(**BASE) != before


def test_key_changes_with_edgebuild_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    from edgebuild.cache import keys

    before = stage_key(**BASE)
    monkeypatch.setattr(keys, "edgebuild_fingerprint", lambda: "0.1.0+source.other")
    assert stage_key(**BASE) != before


def test_source_checkout_fingerprint_follows_the_code() -> None:
    from edgebuild.cache.keys import edgebuild_fingerprint

    # This test runs from the repository, where every .py file of the package counts.
    assert "+source." in edgebuild_fingerprint()


def commit(store: Store, key: str, payload: bytes = b"model") -> Path:
    work = store.begin(key)
    (work / "model.bin").write_bytes(payload)
    return store.commit(key, work, "onnx", {"main": "model.bin"}).path


def test_commit_then_lookup(tmp_path: Path) -> None:
    store = Store(tmp_path)
    path = commit(store, "1" * 64)
    artifact = store.lookup("1" * 64)
    assert artifact is not None and artifact.path == path
    assert artifact.main.read_bytes() == b"model"
    assert not list(store.tmp.iterdir())  # the work folder became the entry


def test_corrupt_entry_is_discarded_with_warning(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    store = Store(tmp_path)
    path = commit(store, "2" * 64)
    (path / "model.bin").write_bytes(b"MODEL")  # same size, different bytes
    assert store.lookup("2" * 64) is not None  # this run already verified what it wrote
    next_run = Store(tmp_path)
    assert next_run.lookup("2" * 64) is None
    assert "corrupt" in caplog.text
    assert not path.exists()


def test_a_cached_run_hashes_only_files_whose_metadata_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fully cached run reads file metadata, not the models; a rewrite is still caught,
    even one that restores the size and modification time."""
    from edgebuild.cache import store as store_module

    path = commit(Store(tmp_path), "5" * 64)
    hashed: list[str] = []
    real = store_module.digest_file
    monkeypatch.setattr(store_module, "digest_file",
                        lambda file: hashed.append(file.name) or real(file))
    assert Store(tmp_path).lookup("5" * 64) is not None
    assert hashed == []  # the signature recorded at commit still holds
    model = path / "model.bin"
    before = model.stat()
    time.sleep(0.05)  # past the file system's coarse clock tick, as any later edit is
    model.write_bytes(b"MODEL")  # same size, different bytes, old mtime put back
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert Store(tmp_path).lookup("5" * 64) is None
    assert hashed == ["model.bin"]


def test_missing_manifest_is_discarded(tmp_path: Path) -> None:
    store = Store(tmp_path)
    path = commit(store, "3" * 64)
    (path / "artifact.json").unlink()
    assert Store(tmp_path).lookup("3" * 64) is None
    assert not path.exists()


def test_second_commit_of_same_key_adopts_the_first(tmp_path: Path) -> None:
    store = Store(tmp_path)
    first = commit(store, "4" * 64, b"one")
    second = commit(store, "4" * 64, b"one")
    assert first == second
    assert not list(store.tmp.iterdir())


def test_worker_killed_mid_write_leaves_no_entry(tmp_path: Path) -> None:
    """SIGKILL between writing files and publishing: nothing under objects/, gc cleans tmp."""
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from edgebuild.cache.store import Store
        store = Store(Path({str(tmp_path)!r}))
        work = store.begin({"5" * 64!r})
        (work / "model.bin").write_bytes(b"half" * 1000)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False)
    assert proc.returncode == -9
    store = Store(tmp_path)
    assert store.lookup("5" * 64) is None
    assert list(store.entries()) == []
    leftovers = list(store.tmp.iterdir())
    assert len(leftovers) == 1
    os.utime(leftovers[0], (0, 0))
    assert store.clean_tmp() == 1


def test_manifest_records_digests(tmp_path: Path) -> None:
    store = Store(tmp_path)
    path = commit(store, "6" * 64)
    manifest = json.loads((path / "artifact.json").read_text())
    assert set(manifest["files"]) == {"model.bin"}
    assert len(manifest["files"]["model.bin"]) == 64


def test_cache_verify_rehashes_what_a_run_trusts_by_metadata(tmp_path: Path) -> None:
    """Bit rot keeps a file's metadata: a run trusts the signature, `cache verify` does not."""
    from edgebuild.cache.store import SEEN, stat_signature
    from edgebuild.cache.verify import verify_entry

    store = Store(tmp_path)
    path = commit(store, "6" * 64)
    model = path / "model.bin"
    model.write_bytes(b"MODEL")
    (path / SEEN).write_text(json.dumps({"model.bin": stat_signature(model.stat())}))
    manifest = json.loads((path / "artifact.json").read_text())
    assert Store(tmp_path).lookup("6" * 64) is not None
    assert "does not match its recorded digest" in verify_entry(store, "6" * 64, manifest,
                                                                None)
