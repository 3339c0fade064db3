"""The shared store's checks, without a run: the typed manifest, names confined before
a byte is written, signatures and trust, notes read only from the artifact's own
files, URL passwords redacted everywhere edgebuild prints them."""

from __future__ import annotations

import json
import logging
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from edgebuild.cache.store import Store
from edgebuild.core.artifact import Artifact
from edgebuild.core.redact import redact

pytest.importorskip("fsspec", reason="--shared-cache needs fsspec (extra: distributed)")
pytest.importorskip("cryptography", reason="signed shared caches need cryptography")

from edgebuild.cache.shared import SharedStore, open_shared
from edgebuild.cache.signing import Trust, generate, read_public_keys

KEY = "ab" * 32


def built(store: Store, metadata: dict[str, Any] | None = None) -> Artifact:
    work = store.begin(KEY)
    (work / "model.onnx").write_bytes(b"model bytes")
    return store.commit(KEY, work, "onnx", {"main": "model.onnx", **(metadata or {})})


@pytest.fixture
def writer(tmp_path: Path) -> tuple[SharedStore, Artifact]:
    signer = generate(tmp_path / "keys" / "writer.pem")
    shared = SharedStore(str(tmp_path / "team"), Trust(), signer)
    artifact = built(Store(tmp_path / "a"))
    shared.push(artifact)
    return shared, artifact


def reader(tmp_path: Path, trust: Trust) -> tuple[SharedStore, Store]:
    return SharedStore(str(tmp_path / "team"), trust), Store(tmp_path / "b")


def manifest_path(tmp_path: Path) -> Path:
    return tmp_path / "team" / "objects" / KEY[:2] / KEY / "artifact.json"


def test_the_key_is_private_and_its_public_half_is_one_line(tmp_path: Path) -> None:
    signer = generate(tmp_path / "k" / "key.pem")
    assert stat.S_IMODE((tmp_path / "k" / "key.pem").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o700
    assert read_public_keys(tmp_path / "k" / "key.pub") == [signer.raw_public]


def test_a_trusted_writers_entry_is_used_and_an_untrusted_one_is_not(
        writer: tuple[SharedStore, Artifact], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    shared, artifact = writer
    assert shared.signer is not None
    trusted = Trust({shared.signer.writer: shared.signer.raw_public})
    got, store = reader(tmp_path, trusted)
    fetched = got.fetch(KEY, store, "onnx-optimize")
    assert fetched is not None and fetched.files == artifact.files
    stranger, store_c = SharedStore(str(tmp_path / "team"), Trust()), Store(tmp_path / "c")
    with caplog.at_level(logging.WARNING):
        assert stranger.fetch(KEY, store_c, "onnx-optimize") is None
        assert stranger.fetch(KEY, store_c, "onnx-optimize") is None
    assert len(caplog.records) == 1 and "is not a trusted key" in caplog.text
    assert list(store_c.entry_keys()) == []


def test_trust_any_takes_unsigned_builds_but_never_references(
        writer: tuple[SharedStore, Artifact], tmp_path: Path) -> None:
    manifest = json.loads(manifest_path(tmp_path).read_text())
    del manifest["signature"]
    manifest_path(tmp_path).write_text(json.dumps(manifest))
    got, store = reader(tmp_path, Trust(anyone=True))
    assert got.fetch(KEY, store, "reference") is None
    assert got.fetch(KEY, store, "onnx-optimize") is not None


@pytest.mark.parametrize("field,value", [
    ("files", "/tmp/edgebuild-absolute-name"), ("files", "../escape"),
    ("files", "a/../../escape"), ("files", "artifact.json"),
    ("notes", "/etc/hostname"), ("notes", "../../secret"), ("main", "/etc/passwd"),
    ("ships", "missing.bin")])
def test_unsafe_names_refuse_the_entry_before_a_byte_is_written(
        writer: tuple[SharedStore, Artifact], tmp_path: Path, field: str, value: str) -> None:
    manifest = json.loads(manifest_path(tmp_path).read_text())
    if field == "files":
        manifest["files"][value] = "0" * 64
        manifest["sizes"][value] = 0
    else:
        manifest["metadata"][field] = [value] if field != "main" else value
    manifest_path(tmp_path).write_text(json.dumps(manifest))
    got, store = reader(tmp_path, Trust(anyone=True))
    assert got.fetch(KEY, store, "compile") is None
    assert list(store.entry_keys()) == []
    assert not Path("/tmp/edgebuild-absolute-name").exists()
    assert not (tmp_path / "b" / "escape").exists() and not (tmp_path / "escape").exists()


def test_a_cut_manifest_is_refused_then_replaced_by_the_next_upload(
        writer: tuple[SharedStore, Artifact], tmp_path: Path) -> None:
    shared, artifact = writer
    path = manifest_path(tmp_path)
    path.write_bytes(path.read_bytes()[:50])
    got, store = reader(tmp_path, Trust(anyone=True))
    assert got.fetch(KEY, store, "compile") is None
    shared.push(artifact)
    assert json.loads(path.read_text())["key"] == KEY
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_an_unreachable_store_is_a_warning_without_its_password(
        caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("fsspec.implementations.ftp")
    with caplog.at_level(logging.WARNING):
        assert open_shared("ftp://builder:hunter2@127.0.0.1:9/cache", Trust(), None) is None
    assert "unreachable" in caplog.text and "hunter2" not in caplog.text


def test_notes_are_only_the_artifacts_own_files(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    from edgebuild.run.driver import notes_of

    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    artifact = built(Store(tmp_path / "s"), {"notes": [str(secret), "../../../secret.txt",
                                                       "model.onnx"]})
    with caplog.at_level(logging.WARNING):
        notes = notes_of(artifact)
    assert list(notes) == ["model.onnx"] and "hunter2" not in json.dumps(notes)
    assert caplog.text.count("skipping a note") == 2


def test_redaction() -> None:
    assert redact("ftp://u:p@ss@host:21/x and sftp://me@h/p") == \
        "ftp://u:***@host:21/x and sftp://me@h/p"
    assert redact("s3://bucket/key") == "s3://bucket/key"


def test_the_internal_error_log_redacts_argv(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    from edgebuild import cli

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setattr(sys, "argv", ["edgebuild", "run", "--shared-cache",
                                      "ftp://u:hunter2@h/c"])
    assert cli._internal_error(ConnectionRefusedError("ftp://u:hunter2@h/c"), "") == 4
    log = next(tmp_path.glob("edgebuild-internal-error-*.log")).read_text()
    assert "hunter2" not in log and "ftp://u:***@h/c" in log
