"""A stage whose Dask task fails in a way Dask cannot send back, or never ends, does not
hang the build (issue: a RecursionError on a worker left `future.result()` waiting
forever): the stage fails in one line naming the worker, and the rest of the run goes on.

No timing is asserted: the subprocess timeout only turns a regression into a failure
instead of a hung test run."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import TINY_RECIPE

pytest.importorskip("distributed", reason="--cluster needs Dask distributed "
                    "(extra: distributed)")
pytestmark = pytest.mark.distributed

# A carried dataset function whose stage answers with a result too deeply nested to read
# back: `json.loads` in `run_remote` raised RecursionError on the Dask worker, an exception
# Dask cannot ship to the client (the client used to wait forever). The result is now read
# as a typed StageResult, whose parser refuses the nesting with a one-line error.
TOO_DEEP = """\
import os
import sys


def load():
    with open(sys.argv[2], "w") as result:  # the stage process's RESULT.json
        result.write("[" * 200_000 + "]" * 200_000)
    os._exit(0)
"""

# A stage that leaves a folder tree thousands of levels deep in its task folder: removing
# it raised RecursionError in `run_remote`, with a traceback too deep for Dask to pickle
# (the hang as first seen).
DEEP_TREE = """\
import os
import sys
from pathlib import Path


def load():
    os.chdir(Path(sys.argv[2]).parents[2])  # the task folder (RESULT.json is in scratch/)
    for _ in range(2500):
        os.mkdir("d")
        os.chdir("d")
    raise ValueError("no samples here")
"""

STUCK = """\
import time


def load():
    time.sleep(3600)
"""


def run(recipe: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgebuild", "run", str(recipe), "--cluster", "local:1",
         "--keep-going", "--out", str(out), *extra],
        capture_output=True, text=True, check=False, timeout=600)


def project(tiny_project: Callable[..., Path], code: str) -> Path:
    recipe = tiny_project(TINY_RECIPE.replace(
        "{kind: npz, path: samples.npz, labels: y}",
        "{kind: callable, function: 'hostile.py:load'}"))
    (recipe.parent / "hostile.py").write_text(code)
    return recipe


def stages(out: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    return {s["id"]: s for s in json.loads((out / "report.json").read_text())["stages"]}


def failure_line(stderr: str, stage: str) -> str:
    """The one line the CLI prints for the failed `stage` (infer fails alike)."""
    [line] = [line for line in stderr.splitlines() if line.startswith(f"stage '{stage}'")]
    return line


@pytest.mark.slow
def test_an_exception_dask_cannot_send_back_fails_the_stage(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    recipe = project(tiny_project, TOO_DEEP)
    result = run(recipe, tmp_path / "out")
    text = result.stdout + result.stderr
    assert result.returncode == 3, text
    assert "Traceback" not in result.stdout + result.stderr
    line = failure_line(result.stderr, "reference")
    assert "malformed" in line and "recursion limit" in line, line  # what
    assert "tls://127.0.0.1:" in line, line  # and where
    outcomes = {sid: s["outcome"] for sid, s in stages(tmp_path / "out").items()}
    assert outcomes["reference"] == "failed"
    assert outcomes["measure-latency@host-cpu"] == "built"  # keep-going: the rest ran


@pytest.mark.slow
def test_a_stage_leaving_a_very_deep_tree_fails_with_its_own_error(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    from edgebuild.execute.taskdirs import tasks_root

    recipe = project(tiny_project, DEEP_TREE)
    result = run(recipe, tmp_path / "out")
    text = result.stdout + result.stderr
    assert result.returncode == 3, text
    line = failure_line(result.stderr, "reference")
    assert line == "stage 'reference' failed: dataset 'samples': no samples here", text
    root = tasks_root()
    assert root is not None
    assert not list(root.glob("*/task-*/scratch/d"))  # its task folder was removed


@pytest.mark.slow
def test_a_stage_that_never_ends_fails_after_the_stage_timeout(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    recipe = project(tiny_project, STUCK)
    result = run(recipe, tmp_path / "out", "--stage-timeout", "20")
    text = result.stdout + result.stderr
    assert result.returncode == 3, text
    line = failure_line(result.stderr, "reference")
    assert "20 s" in line and "tls://127.0.0.1:" in line, line
    outcomes = {sid: s["outcome"] for sid, s in stages(tmp_path / "out").items()}
    assert outcomes["measure-latency@host-cpu"] == "built"


def recursing_run_remote(*args: object) -> object:
    """In place of run_remote on the worker: fails with a traceback too deep to pickle,
    before any reply exists (what run_remote's own guard cannot catch)."""
    from edgebuild.execute.remote.far_side import announce

    announce()

    def down(n: int) -> int:
        return down(n + 1) + 1

    return down(0)


def test_the_client_stops_waiting_for_a_reply_that_never_comes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import edgebuild.execute.remote.far_side as remote
    from edgebuild.execute.cluster import ClusterSpec, DaskExecutor
    from edgebuild.execute.task import StageTask

    monkeypatch.setattr(remote, "run_remote", recursing_run_remote)  # sent by reference
    spec = {"stage_id": "lost", "recipe_dir": str(tmp_path), "datasets": {}, "inputs": {},
            "out": str(tmp_path / "out"), "source": None}
    executor = DaskExecutor(ClusterSpec.parse("local:1"), stage_timeout_s=5, reply_grace_s=5)
    try:
        outcome = executor.submit(StageTask("lost", spec, tmp_path / "lost.log")).result(
            timeout=300)
    finally:
        executor.shutdown()
    assert outcome.result.status == "error"
    message = outcome.result.message
    assert message.startswith("no reply from worker tls://127.0.0.1:"), message
    assert "within 10 s" in message and "\n" not in message
