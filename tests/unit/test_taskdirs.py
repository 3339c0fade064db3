"""Task folders (execute/taskdirs.py): whose are stale. A folder names its process by pid
and start time; only a process that started *later* under the same pid (a reused pid)
or no process at all makes it stale. An emulated board's process reads its own start
time one tick late (qemu-user answers /proc/self/stat itself): its folder must stay
while it runs, or its stage loses its spec and log mid-run."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from edgebuild.execute import taskdirs


@pytest.fixture()
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = taskdirs.tasks_root()
    assert made is not None
    return made


def folder(root: Path, pid: int, started: int | str) -> Path:
    made = root / f"{pid}-{started}"
    (made / "task-x").mkdir(parents=True)
    return made


def test_a_live_process_keeps_its_folder_even_if_it_read_its_start_late(root: Path) -> None:
    me = os.getpid()
    real = int(taskdirs._start_time(me) or 0)
    exact, late = folder(root, me, real), folder(root, me, f"{real + 1}x")  # unreadable: kept
    emulated = root / f"{me}-{real + 1}"  # qemu-user's own reading: one tick late
    emulated.mkdir()
    reused = folder(root, me, real - 1)  # the pid's earlier owner: it has died
    taskdirs.remove_stale()
    assert exact.is_dir() and late.is_dir() and emulated.is_dir()
    assert not reused.exists()


def test_a_finished_process_loses_its_folder(root: Path) -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    gone = folder(root, int(child.stdout), 12345)
    taskdirs.remove_stale()
    assert not gone.exists()
