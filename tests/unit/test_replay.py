"""A fully cached run is replayed only while nothing it read has changed (run/replay.py).

Every change a user can make between two runs — the recipe, the model, an environment
variable, a deleted report, a damaged cache entry, a phone plugged in — must reach the
normal run; only an identical command on identical inputs gets the recorded account.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from edgebuild.run.replay import REPLAY_DIR, ReplayRecord
from tests.conftest import REPO, make_tiny_onnx, retimed

NOTE = "its account is replayed above"


def cli(cache: Path, *args: str, env: dict[str, str] | None = None,
        python: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`python -m edgebuild` with its own cache, without $CI (CI sets it; the run reads it):
    the console script's process. `python`: interpreter flags (-X importtime)."""
    full = {k: v for k, v in os.environ.items() if k not in ("CI", "EDGEBUILD_NO_REPLAY")}
    full.update({"EDGEBUILD_CACHE_DIR": str(cache), **(env or {})})
    return subprocess.run([sys.executable, *python, "-m", "edgebuild", *args], cwd=REPO,
                          env=full, capture_output=True, text=True, check=False, timeout=600)


def replayed(done: subprocess.CompletedProcess[str]) -> bool:
    return NOTE in done.stderr


@pytest.mark.slow
def test_a_cached_run_is_replayed_until_something_it_read_changes(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    recipe, out, cache = tiny_project(), tmp_path / "out", tmp_path / "cache"
    argv = ("run", "-q", str(recipe), "--out", str(out))

    def settled() -> subprocess.CompletedProcess[str]:
        """Runs until one is fully cached (a latency timed under load runs again), then
        the replay of that one: its stdout, exit code and a line saying so."""
        for _ in range(4):
            done = cli(cache, *argv)
            assert done.returncode == 0, done.stdout + done.stderr
            if not retimed(out) and not replayed(done) and "0 stages executed" in done.stdout:
                break
        again = cli(cache, *argv)
        assert replayed(again), again.stderr
        assert (again.returncode, again.stdout) == (done.returncode, done.stdout)
        return again

    assert not replayed(cli(cache, *argv))  # the build itself is never replayed
    settled()

    # The replay imports nothing of the run: not pydantic, not yaml (the same command,
    # with Python's import log).
    light = cli(cache, *argv, python=("-X", "importtime"))
    imported = {line.rsplit("|", 1)[-1].strip() for line in light.stderr.splitlines()
                if line.startswith("import time:")}
    assert replayed(light) and "edgebuild.run.replay" in imported, light.stderr[-2000:]
    assert not imported & {"pydantic", "yaml", "numpy", "networkx"}

    # The recipe: a new budget is judged (same bytes but a new mtime would miss too).
    recipe.write_text(recipe.read_text().replace("budget_ms: 1000", "budget_ms: 999"))
    done = cli(cache, *argv)
    assert not replayed(done) and "budget 999 ms" in done.stdout, done.stdout
    settled()

    # A deleted report is written again.
    (out / "report.json").unlink()
    assert not replayed(cli(cache, *argv)) and (out / "report.json").is_file()
    settled()

    # An environment variable the run reads: CI's log format.
    done = cli(cache, *argv, env={"CI": "true"})
    assert not replayed(done) and "edgebuild: summary.md: " in done.stdout
    settled()

    # A cache entry damaged in place (same size, same inode).
    entry = max((p for p in (cache / "objects").rglob("*") if p.is_file()),
                key=lambda p: p.stat().st_size)
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with entry.open("r+b") as handle:
        handle.write(data)
    assert not replayed(cli(cache, *argv))
    settled()

    # The model: its stages run again.
    make_tiny_onnx(recipe.parent / "tiny.onnx", scale=3.0)
    done = cli(cache, *argv)
    assert not replayed(done) and "0 stages executed" not in done.stdout, done.stdout
    settled()

    # Asked not to; a record that is not one.
    assert not replayed(cli(cache, *argv, "--no-replay"))
    assert not replayed(cli(cache, *argv, env={"EDGEBUILD_NO_REPLAY": "1"}))
    settled()
    for record in (cache / REPLAY_DIR).glob("*.json"):
        record.write_text('{"version": 1, "exit_code": "0"}')
    done = cli(cache, *argv)
    assert done.returncode == 0 and not replayed(done), done.stderr


def test_main_called_inside_another_program_never_records(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    """Its monkeypatches are invisible to a record (a test patching a probe, say)."""
    from edgebuild.cli import main

    recipe, cache = tiny_project(), tmp_path / "cache"
    argv = ["run", "-q", str(recipe), "--out", str(tmp_path / "out"),
            "--cache-dir", str(cache)]
    assert main(argv) == 0
    assert main(argv) == 0
    assert not list((cache / REPLAY_DIR).glob("*.json"))


FAKE_ADB = """\
#!/bin/sh
cat {listing}
"""

PROBE = """\
import subprocess, sys
from pathlib import Path
from edgebuild.devices.adb import connect
from edgebuild.run import replay

root = Path(sys.argv[1])
code = replay.replay(root)
if code is not None:
    sys.exit(code)
with replay.recording(root) as recorder:
    print(connect(None))
    if sys.argv[2] == "and-another-process":
        subprocess.run(["true"], check=True)
    recorder.save(0, 0.01)
"""


def probe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "probe.py"
    if not script.exists():  # written once: a rewritten script is new code, never replayed
        script.write_text(PROBE)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("EDGEBUILD_NO_REPLAY", None)
    return subprocess.run([sys.executable, str(script), str(tmp_path / "cache"), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)


def test_a_device_question_is_asked_again_on_replay(tmp_path: Path) -> None:
    """`adb devices -l` is kept with its answer; a replay asks it again and only an equal
    answer replays (a phone plugged in since is seen); no other process is allowed."""
    listing = tmp_path / "listing.txt"
    listing.write_text("List of devices attached\n\n")
    (tmp_path / "bin").mkdir()
    adb = tmp_path / "bin" / "adb"
    adb.write_text(FAKE_ADB.format(listing=listing))
    adb.chmod(0o755)

    first = probe(tmp_path, "quiet")
    assert "no Android device attached" in first.stdout, first.stdout + first.stderr
    again = probe(tmp_path, "quiet")
    assert replayed(again) and again.stdout == first.stdout

    # Same size, same file: only the question asked again can tell.
    listing.write_text("List of devices attached\nR58M1234 unauthorized usb:1-1\n")
    plugged = probe(tmp_path, "quiet")
    assert not replayed(plugged) and "unauthorized" in plugged.stdout, plugged.stdout
    assert replayed(probe(tmp_path, "quiet"))

    adb.unlink()  # this adb gone (another may be on the PATH): seen from its path
    assert not replayed(probe(tmp_path, "quiet"))

    # Any other process started: its answer cannot be checked, so nothing is recorded.
    records = tmp_path / "cache" / REPLAY_DIR
    for record in records.glob("*.json"):
        record.unlink()
    probe(tmp_path, "and-another-process")
    assert not list(records.glob("*.json"))


def test_a_record_is_read_as_data() -> None:
    good = ReplayRecord(exit_code=0, when="2026-11-29T05:00:00+00:00", seconds=0.1,
                        env={"CI": None}, paths={"/x": [1, 2, 3, 4], "/d": "dir", "/n": None},
                        listed=["/d"], output=[(1, "ok\n")], asked=[(["adb"], 0, "")],
                        env_names=None)
    assert ReplayRecord.read(good.to_json().encode()) == good
    raw = json.loads(good.to_json())
    for field, bad in (("exit_code", "0"), ("paths", {"/x": "file"}), ("output", [[3, "x"]]),
                       ("env", {"CI": 1}), ("asked", [[[], 0, ""]]), ("version", 2)):
        assert ReplayRecord.read(json.dumps({**raw, field: bad}).encode()) is None, field
    assert ReplayRecord.read(b"\x00not json") is None
    assert ReplayRecord.read(b"[1, 2]") is None
