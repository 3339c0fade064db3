"""The fleet's pieces without a build: the agent's imports stay light, a layout reference
parses, a blob copy refuses every byte that is not its digest, and a signed statement
is refused when any field of it changed after signing (edgebuild/fleet/)."""

from __future__ import annotations

import datetime as dt
import io
import subprocess
import sys
from pathlib import Path

import pytest

from edgebuild.cache import signing
from edgebuild.errors import EdgebuildError
from edgebuild.fleet.layout import BlobError, Layout, copy_verified, parse_ref
from edgebuild.fleet.records import FILE_LAYER, describe
from edgebuild.fleet.statement import Statement, refusal, sign, trust_from

HEAVY = ("torch", "onnx", "onnxruntime", "numpy", "openvino", "tensorflow", "yaml",
         "networkx", "cryptography")
NOW = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)


def test_the_agent_imports_no_heavy_module() -> None:
    """The device side imports the standard library and pydantic; `cryptography` only
    when it verifies; never a runtime, numpy or torch (the model check is a subprocess)."""
    code = ("import sys, edgebuild.fleet.agent, edgebuild.fleet.commands, edgebuild.cli; "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_layout_references() -> None:
    assert parse_ref("oci-layout:/srv/reg", with_tag=False) == (Path("/srv/reg"), None)
    assert parse_ref("oci-layout:reg:1.2.0", with_tag=True) == (Path("reg"), "1.2.0")
    with pytest.raises(EdgebuildError, match="not an OCI layout reference"):
        parse_ref("docker://example/x", with_tag=False)
    with pytest.raises(EdgebuildError, match="no version"):
        parse_ref("oci-layout:reg", with_tag=True)


@pytest.mark.parametrize("served", [b"model bytes", b"model byte", b"model bytes+", b"mode1 bytes"])
def test_a_blob_copy_refuses_other_bytes(tmp_path: Path, served: bytes) -> None:
    descriptor = describe(FILE_LAYER, b"model bytes")
    target = tmp_path / "files" / "model.onnx"
    if served == b"model bytes":
        assert copy_verified(io.BytesIO(served), target, descriptor, "test") == len(served)
        assert target.read_bytes() == served
        return
    with pytest.raises(BlobError, match="does not match its digest and size"):
        copy_verified(io.BytesIO(served), target, descriptor, "test")
    assert list((tmp_path / "files").iterdir()) == []  # no partial file left


def test_a_tag_points_at_one_descriptor(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "reg")
    layout.init()
    first = layout.put(FILE_LAYER, b"one")
    second = layout.put(FILE_LAYER, b"two")
    layout.tag("v", first)
    assert layout.resolve("v").digest == first.digest
    layout.tag("v", second)
    assert layout.resolve("v").digest == second.digest and list(layout.tags()) == ["v"]
    assert layout.written == 2
    assert layout.put(FILE_LAYER, b"one") == first and layout.written == 2  # stored once
    with pytest.raises(EdgebuildError, match="no tag 'w'"):
        layout.resolve("w")


def statement(**changes: object) -> Statement:
    fields: dict[str, object] = {
        "channel": "production", "version": "1.0.0", "index": "sha256:" + "a" * 64,
        "index_size": 100, "sequence": 3, "issued": NOW,
        "expires": NOW + dt.timedelta(days=1)}
    fields.update(changes)
    return Statement.model_validate(fields)


def test_a_statement_verifies_only_as_signed(tmp_path: Path) -> None:
    signer = signing.generate(tmp_path / "k.pem")
    trust = trust_from([tmp_path / "k.pub"])
    signed = sign(statement(), signer)
    assert refusal(signed, trust, "production", NOW) == ""
    for change in ({"sequence": 4}, {"index": "sha256:" + "b" * 64}, {"channel": "canary"},
                   {"expires": NOW + dt.timedelta(days=365)}, {"version": "0.9.0"}):
        altered = signed.model_copy(update={"statement": statement(**change)})
        assert "does not verify" in refusal(altered, trust, str(altered.statement.channel),
                                            NOW), change
    assert "about channel 'production', not 'canary'" in refusal(signed, trust, "canary", NOW)
    assert "expired" in refusal(signed, trust, "production", NOW + dt.timedelta(days=2))
    other = signing.generate(tmp_path / "other.pem")
    assert "not a trusted key" in refusal(sign(statement(), other), trust, "production", NOW)
    assert "unsigned" in refusal(signed.model_copy(update={"signature": None}), trust,
                                 "production", NOW)


def test_a_checks_line_is_its_stdout_not_a_runtimes_log(tmp_path: Path) -> None:
    """The model check prints its verdict on stdout; a runtime logs to stderr after it
    (TFLite: "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.")."""
    from edgebuild.fleet.agent import _run

    script = ("import sys; print('tflite loaded model.tflite and ran one inference'); "
              "sys.stdout.flush(); print('INFO: Created TensorFlow Lite XNNPACK delegate', "
              "file=sys.stderr)")
    assert _run([sys.executable, "-c", script], tmp_path, {}) == (
        0, "tflite loaded model.tflite and ran one inference")
    failing = "import sys; print('no such file', file=sys.stderr); sys.exit(3)"
    assert _run([sys.executable, "-c", failing], tmp_path, {}) == (3, "no such file")
