"""Task folders on a worker machine that never outlive their task.

A remote stage unpacks its inputs (models, datasets) into a task folder. The task
removes it when it ends, but a worker that is killed (SIGKILL, OOM killer, a lost
machine) cannot. So every task folder lives under a folder named after the worker
process that made it, and whoever starts a task, or a worker, or stops a local
cluster, removes the folders of processes that are gone:

    $TMPDIR/edgebuild-tasks-<uid>/<pid>-<process start time>/task-XXXX/
        (pid, start time) no longer a live process -> the whole folder is removed

The start time tells a reused pid apart: a process that took the pid later started
*later* than the one the folder names. Never "different", only later: a process's own
reading of its start time may be later than the kernel's, never earlier. qemu-user
(the emulated boards) answers /proc/self/stat itself, with the time its emulator started
(Debian's qemu-user-static 7.2, measured: one clock tick after the kernel's figure on a
loaded machine), and the board's task folder was once removed under a running stage by a
host process that read the kernel's figure: the stage's spec and log vanished, and it
"exited with code 1 without a result" with an empty log. The parent folder is this user's (0700,
not a symlink): another user of the machine cannot plant or read a task's files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[19]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return "?"
        return "?"  # alive; no /proc here to tell a reused pid apart


def tasks_root() -> Path | None:
    """This user's folder of task folders, or None if it is not safely ours."""
    root = Path(tempfile.gettempdir()) / f"edgebuild-tasks-{os.getuid()}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return root


def _own_folder(root: Path) -> Path:
    folder = root / f"{os.getpid()}-{_start_time(os.getpid())}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def remove_stale() -> int:
    """Remove the task folders of worker processes that no longer run; how many."""
    root = tasks_root()
    if root is None:
        return 0
    removed = 0
    for folder in root.iterdir():
        pid, _, started = folder.name.partition("-")
        if not pid.isdigit():
            continue
        now = _start_time(int(pid))
        if now is None or (now.isdigit() and started.isdigit() and int(now) > int(started)):
            remove_tree(folder)
            removed += 1
    return removed


def remove_tree(folder: Path) -> None:
    """Remove `folder` and everything in it, never raising.

    Python's `shutil.rmtree` recurses once per level (3.11): a stage that left a tree
    a few thousand folders deep made it raise RecursionError, which on a Dask worker
    is an exception Dask cannot send back. `rm -rf` walks any depth.
    """
    try:
        shutil.rmtree(folder, ignore_errors=True)
        return
    except RecursionError:
        pass
    with contextlib.suppress(OSError, subprocess.SubprocessError):  # else: remove_stale's
        subprocess.run(["rm", "-rf", "--", str(folder)], check=False,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=600)


def new_task_folder() -> Path:
    """A fresh folder for one task, under this process's folder (see the module doc)."""
    remove_stale()
    root = tasks_root()
    if root is None:  # someone else's or a symlink: a plain private temporary folder
        return Path(tempfile.mkdtemp(prefix="edgebuild-task-"))
    return Path(tempfile.mkdtemp(prefix="task-", dir=_own_folder(root)))
