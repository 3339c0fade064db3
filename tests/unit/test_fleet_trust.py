"""The fleet against what issue 39 found: promotions that survive a fresh store, an agent
a hostile mirror cannot freeze, and state repaired from the disk (edgebuild/fleet/).

Fast: a hand-made build of one tiny file (no model, `--no-model-check`), the agent run
in-process with its clock given, except where a hang on the old code must end as a
failure (a subprocess with a timeout).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from edgebuild.cache import signing
from edgebuild.core.manifest import MANIFEST_NAME
from edgebuild.errors import EdgebuildError, ExitCode
from edgebuild.fleet import agent as agent_module
from edgebuild.fleet.agent import check_once, run_agent
from edgebuild.fleet.agent_options import AgentOptions
from edgebuild.fleet.layout import Layout
from edgebuild.fleet.promote import promote
from edgebuild.fleet.publish import publish
from edgebuild.fleet.records import (
    MANIFEST,
    STATEMENT_ARTIFACT,
    STATEMENT_LAYER,
    TITLE,
    ImageManifest,
)
from edgebuild.fleet.remote import Registry

T0 = dt.datetime(2026, 11, 27, 1, 0, tzinfo=dt.UTC)
PROFILE = {"name": "host-cpu", "description": "test", "backend": "onnxruntime",
           "device": {"kind": "cpu", "arch": "x86_64", "name": "test"}}
DEEP = b"[" * 100_000 + b"]" * 100_000


def tiny_build(root: Path, content: bytes) -> Path:
    """A build folder as `edgebuild run` leaves it, for one target and one file."""
    folder = root / "artifacts" / "host-cpu"
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(content)
    manifest = {
        "edgebuild_version": "0.1.0", "created": "2026-01-01T00:00:00+00:00",
        "recipe": "tiny", "target": "host-cpu", "profile": PROFILE,
        "backend": "onnxruntime", "backend_version": 2, "tools": {}, "precision": "fp32",
        "builds_on_device": False, "stage": "compile@host-cpu", "stage_key": "a" * 64,
        "format": "onnx", "main": "model.onnx", "passed": True,
        "files": [{"name": "model.onnx", "sha256": hashlib.sha256(content).hexdigest(),
                   "size": len(content)}]}
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest))
    return root


@pytest.fixture
def key(tmp_path: Path) -> Path:
    signing.generate(tmp_path / "keys" / "release.pem")
    return tmp_path / "keys" / "release.pem"


def options(source: Path | str, root: Path, key: Path, **changes: Any) -> AgentOptions:
    fields: dict[str, Any] = {
        "source": source if isinstance(source, str) else f"oci-layout:{source}",
        "channel": "production", "target": "host-cpu", "root": root,
        "trust": [key.with_suffix(".pub")], "model_check": False}
    fields.update(changes)
    return AgentOptions(**fields)


def release(tmp_path: Path, layout: Path, version: str, key: Path,
            at: dt.datetime) -> None:
    """publish a build of `version` to `layout` and promote it at `at` (the CI step)."""
    build = tiny_build(tmp_path / f"build-{version}-{layout.name}", version.encode() * 8)
    publish(build, Layout(layout), version)
    promote(Layout(layout), version, "production", key, 30, now=at)


def active(root: Path) -> str:
    return str(json.loads((root / "state.json").read_text())["active"]["version"])


# --- 1. the sequence comes from the signer, not from the store ------------------------

def test_the_ci_flow_on_a_fresh_layout_each_run_installs_every_release(
        tmp_path: Path, key: Path) -> None:
    """docs/fleet.md's CI publishes to a new layout on every run: each promotion must
    still be newer than the last, and a device installs all three in order."""
    root = tmp_path / "device"
    for run, version in enumerate(("1.0.0", "2.0.0", "3.0.0")):
        at = T0 + dt.timedelta(hours=run)
        layout = tmp_path / f"ci-run-{run}"  # fresh: nothing of the runs before
        release(tmp_path, layout, version, key, at)
        outcome = check_once(options(layout, root, key), now=at + dt.timedelta(minutes=1))
        assert outcome.code == ExitCode.OK, outcome.message
        assert f"{version} activated" in outcome.message
        assert active(root) == version
    # A mirror still serving the first run's layout is a rewound channel: refused.
    outcome = check_once(options(tmp_path / "ci-run-0", root, key),
                         now=T0 + dt.timedelta(hours=3))
    assert outcome.code == ExitCode.STAGE_FAILED
    assert "is older than sequence" in outcome.message
    assert "a rewound channel tag, a downgrade or a replay" in outcome.message
    assert active(root) == "3.0.0"


def test_a_rewound_channel_tag_cannot_lower_the_next_promotion(tmp_path: Path,
                                                               key: Path) -> None:
    """Whoever can write the store (no key) rewinds the channel tag to an old signed
    statement: the device refuses it, and the next promotion is still newer than what
    the device has."""
    layout, root = tmp_path / "layout", tmp_path / "device"
    release(tmp_path, layout, "1.0.0", key, T0)
    first = Layout(layout).resolve("production")
    release(tmp_path, layout, "2.0.0", key, T0 + dt.timedelta(minutes=1))
    assert check_once(options(layout, root, key), now=T0 + dt.timedelta(minutes=2)).code == 0
    Layout(layout).tag("production", first)  # rewound
    outcome = check_once(options(layout, root, key), now=T0 + dt.timedelta(minutes=3))
    assert outcome.code == ExitCode.STAGE_FAILED and "rewound channel tag" in outcome.message
    # The next promotion takes its sequence from its clock, not from the rewound store.
    release(tmp_path, layout, "3.0.0", key, T0 + dt.timedelta(minutes=3))
    outcome = check_once(options(layout, root, key), now=T0 + dt.timedelta(minutes=4))
    assert outcome.code == ExitCode.OK and active(root) == "3.0.0", outcome.message


def test_the_sequence_is_the_issue_time_or_above_the_signers_own_last(
        tmp_path: Path, key: Path) -> None:
    """A statement in the store counts only when it verifies against the signing key:
    then the next is above it even when the clock is behind (two promotions in the
    same millisecond); another key's statement does not move the sequence."""
    layout = tmp_path / "layout"
    release(tmp_path, layout, "1.0.0", key, T0 + dt.timedelta(days=1))
    own = promote(Layout(layout), "1.0.0", "production", key, 30, now=T0)
    assert own.statement.sequence == int((T0 + dt.timedelta(days=1)).timestamp() * 1000) + 1
    signing.generate(tmp_path / "stranger.pem")
    promote(Layout(layout), "1.0.0", "production", tmp_path / "stranger.pem", 30,
            now=T0 + dt.timedelta(days=9))
    signed = promote(Layout(layout), "1.0.0", "production", key, 30, now=T0)
    assert signed.statement.sequence == int(T0.timestamp() * 1000)


# --- 2. a hostile mirror -----------------------------------------------------------

def agent_cli(layout: Path | str, root: Path, key: Path, *extra: str,
              timeout: float = 20) -> subprocess.CompletedProcess[str]:
    source = layout if isinstance(layout, str) else f"oci-layout:{layout}"
    return subprocess.run(
        [sys.executable, "-m", "edgebuild", "agent", "--from", source, "--channel",
         "production", "--target", "host-cpu", "--root", str(root), "--trust",
         str(key.with_suffix(".pub")), "--no-model-check", *extra],
        capture_output=True, text=True, timeout=timeout, check=False)


def one_line_refusal(done: subprocess.CompletedProcess[str], *why: str) -> None:
    text = done.stdout + done.stderr
    assert done.returncode in (ExitCode.USAGE, ExitCode.STAGE_FAILED), text
    assert "Traceback" not in text and "internal error" not in text, text
    assert len(text.strip().splitlines()) <= 2, text  # the line (and a hint)
    for part in why:
        assert part in text, text


def model_blob(layout: Path) -> Path:
    store = Layout(layout)
    index = store.image_index(store.resolve("1.0.0"))
    manifest = store.manifest(index.manifests[0])
    layer = next(d for d in manifest.layers if d.annotation(TITLE) == "model.onnx")
    return store.blob_path(layer.digest)


def test_a_hostile_mirror_ends_each_round_with_one_line(tmp_path: Path, key: Path) -> None:
    """A FIFO where a blob belongs (reading it blocked forever, holding ROOT/.lock), an
    endless device, JSON nested 100,000 deep in the unsigned index.json and in a
    statement anyone can add: each round ends (exit 3) with one line, and the lock is
    free for the next."""
    layout, root = tmp_path / "layout", tmp_path / "device"
    release(tmp_path, layout, "1.0.0", key, dt.datetime.now(dt.UTC))
    blob = model_blob(layout)
    good = blob.read_bytes()
    blob.unlink()
    os.mkfifo(blob)
    one_line_refusal(agent_cli(layout, root, key), "a FIFO", "refused")
    blob.unlink()
    blob.symlink_to("/dev/zero")
    one_line_refusal(agent_cli(layout, root, key), "refused")
    blob.unlink()
    blob.write_bytes(good)
    # A statement anyone can add, nested 100,000 deep, tagged as the channel.
    store = Layout(layout)
    evil = store.put(STATEMENT_LAYER, DEEP)
    record = store.manifest(store.resolve("production")).model_copy(update={"layers": [evil]})
    tagged = store.put_json(MANIFEST, record)
    store.tag("production", tagged.model_copy(update={"artifact_type": STATEMENT_ARTIFACT}))
    one_line_refusal(agent_cli(layout, root, key), "nested more than 200 levels deep")
    (layout / "index.json").write_bytes(DEEP)
    one_line_refusal(agent_cli(layout, root, key), "index.json",
                     "nested more than 200 levels deep")
    assert not (root / "current").exists()


def test_an_interval_agent_logs_a_bad_round_and_keeps_polling(
        tmp_path: Path, key: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    layout, root = tmp_path / "layout", tmp_path / "device"
    release(tmp_path, layout, "1.0.0", key, dt.datetime.now(dt.UTC))
    (layout / "index.json").write_bytes(DEEP)
    rounds: list[float] = []

    def sleep(seconds: float) -> None:
        rounds.append(seconds)
        if len(rounds) == 3:
            raise KeyboardInterrupt  # the way an operator stops it

    monkeypatch.setattr(agent_module.time, "sleep", sleep)
    with pytest.raises(KeyboardInterrupt):
        run_agent(options(layout, root, key, interval=5))
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and all("nested more than 200 levels deep" in x for x in lines)


@contextlib.contextmanager
def dripping_registry() -> Iterator[str]:
    """A 'registry' on 127.0.0.1 that answers every request one byte at a time."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" \
             b"Content-Length: 100000\r\n\r\n" + b"{" * 100_000

    def drip(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            for byte in answer:
                if stop.is_set():
                    return
                conn.sendall(bytes([byte]))
                time.sleep(0.05)

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                threading.Thread(target=drip, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/fleet/tiny"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def test_a_registry_dripping_bytes_is_stopped_at_the_fetch_deadline(
        tmp_path: Path, key: Path) -> None:
    with dripping_registry() as url:
        registry, _ = Registry.parse(url, with_tag=False)
        registry.deadline_s = 0.5
        raised: list[BaseException] = []

        def lookup() -> None:
            try:
                registry.lookup("production")
            except BaseException as exc:  # handed to the test's thread
                raised.append(exc)

        reader = threading.Thread(target=lookup, daemon=True)
        reader.start()
        reader.join(5)  # a 100,000-byte answer at 20 bytes a second: 80 minutes
        assert not reader.is_alive(), "the fetch outlived its deadline"
        assert isinstance(raised[0], EdgebuildError)
        assert "did not finish within its deadline of 0.5 s" in str(raised[0])
        started = time.monotonic()
        done = agent_cli(url, tmp_path / "device", key, "--fetch-deadline", "1")
        one_line_refusal(done, "did not finish within its deadline of 1 s")
        assert time.monotonic() - started < 15
        assert check_once(options(tmp_path / "none", tmp_path / "device", key)).code == \
            ExitCode.STAGE_FAILED  # ROOT/.lock was let go


# --- 3. the disk wins over state.json ------------------------------------------------

def test_a_missing_old_release_folder_is_repaired_not_fatal(tmp_path: Path,
                                                            key: Path) -> None:
    layout, root = tmp_path / "layout", tmp_path / "device"
    for step, version in enumerate(("1.0.0", "2.0.0")):
        release(tmp_path, layout, version, key, T0 + dt.timedelta(minutes=step))
        assert check_once(options(layout, root, key, keep=2),
                          now=T0 + dt.timedelta(minutes=step, seconds=30)).code == 0
    first = json.loads((root / "state.json").read_text())["previous"]["folder"]
    shutil.rmtree(root / "releases" / first)
    release(tmp_path, layout, "3.0.0", key, T0 + dt.timedelta(minutes=5))
    outcome = check_once(options(layout, root, key, keep=2), now=T0 + dt.timedelta(minutes=6))
    assert outcome.code == ExitCode.OK and active(root) == "3.0.0", outcome.message
    state = json.loads((root / "state.json").read_text())
    assert state["previous"]["version"] == "2.0.0"
    assert sorted(state["kept"]) == sorted(p.name for p in (root / "releases").iterdir())
    assert any(e["action"] == "repaired" for e in state["events"])
    again = check_once(options(layout, root, key, keep=2), now=T0 + dt.timedelta(minutes=7))
    assert again.code == ExitCode.OK and "up to date: 3.0.0" in again.message


def test_an_unreadable_state_file_is_rebuilt_from_the_releases(tmp_path: Path,
                                                               key: Path) -> None:
    layout, root = tmp_path / "layout", tmp_path / "device"
    release(tmp_path, layout, "1.0.0", key, T0)
    assert check_once(options(layout, root, key), now=T0).code == 0
    sequence = json.loads((root / "state.json").read_text())["sequence"]
    (root / "state.json").write_bytes(DEEP)
    outcome = check_once(options(layout, root, key), now=T0 + dt.timedelta(minutes=1))
    assert outcome.code == ExitCode.OK and "up to date: 1.0.0" in outcome.message
    state = json.loads((root / "state.json").read_text())
    assert state["sequence"] == sequence and state["events"][0]["action"] == "repaired"
    assert (root / "state.json.broken").read_bytes() == DEEP


# --- 5. the smaller items ----------------------------------------------------------

@pytest.mark.parametrize("days", [1e308, float("inf")])
def test_expires_days_out_of_range_is_a_usage_error(tmp_path: Path, key: Path,
                                                    days: float) -> None:
    layout = tmp_path / "layout"
    publish(tiny_build(tmp_path / "build", b"x"), Layout(layout), "1.0.0")
    with pytest.raises(EdgebuildError, match="--expires-days") as caught:
        promote(Layout(layout), "1.0.0", "production", key, days)
    assert caught.value.exit_code == ExitCode.USAGE


def test_escape_codes_from_the_store_are_printed_escaped(
        tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = tmp_path / "layout"
    release(tmp_path, layout, "1.0.0", key, dt.datetime.now(dt.UTC))
    store = Layout(layout)
    evil = store.put_json(MANIFEST, ImageManifest.model_validate(
        json.loads(store.read_blob(store.resolve("production"))))
        .model_copy(update={"artifact_type": "\x1b]0;pwned\x07\x1b[2J\rok"}))
    store.tag("production", evil)
    assert run_agent(options(layout, tmp_path / "device", key)) == ExitCode.STAGE_FAILED
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\\x1b]0;pwned\\x07" in out, out


def test_device_facts_nested_deep_are_refused(tmp_path: Path) -> None:
    from edgebuild.fleet.jetson import read_facts

    (tmp_path / "facts.json").write_bytes(DEEP)
    with pytest.raises(EdgebuildError, match="nested more than 200 levels deep"):
        read_facts(tmp_path / "facts.json")


def test_publish_refuses_a_symlinked_input_as_a_read(tmp_path: Path) -> None:
    build = tiny_build(tmp_path / "build", b"model")
    secret = tmp_path / "secret"
    secret.write_bytes(b"model")  # the same bytes: only the symlink gives it away
    model = build / "artifacts" / "host-cpu" / "model.onnx"
    model.unlink()
    model.symlink_to(secret)
    with pytest.raises(EdgebuildError, match=r"refusing to read 'model\.onnx': it is not "
                                             r"inside"):
        publish(build, Layout(tmp_path / "layout"), "1.0.0")
