"""`import edgebuild`, `--help`, `plan` and a cached `run` (probing for absent devices
included) load no heavy framework.

Runs in subprocesses so that what the test process imported does not count.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

HEAVY = ("torch", "tensorflow", "openvino", "coremltools", "tensorrt", "onnxruntime", "onnx",
         "nncf", "onnxslim", "executorch", "torchao")

CHECK = """
import sys, runpy
sys.argv = ["edgebuild", *{argv!r}]
try:
    runpy.run_module("edgebuild", run_name="__main__")
except SystemExit as exit:
    code = exit.code
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY=" + ",".join(heavy))
sys.exit(code)
"""


def loaded_heavy(argv: list[str], cwd: Path | None = None, heavy: tuple[str, ...] = HEAVY
                 ) -> tuple[int, list[str], str]:
    script = textwrap.dedent(CHECK.format(argv=argv, heavy=heavy))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=cwd, check=False)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("HEAVY="))
    modules = [m for m in line.removeprefix("HEAVY=").split(",") if m]
    return proc.returncode, modules, proc.stdout + proc.stderr


def test_import_edgebuild_is_light() -> None:
    code = "import sys, edgebuild, edgebuild.cli, edgebuild.api; " \
           f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_help_is_light() -> None:
    code, heavy, _ = loaded_heavy(["--help"])
    assert code == 0
    assert heavy == []


def test_plan_and_validate_are_light(tiny_project: Callable[..., Path]) -> None:
    recipe = tiny_project()
    for argv in (["plan", str(recipe)], ["validate", str(recipe)],
                 ["plan", str(recipe), "--format", "mermaid"], ["targets"]):
        code, heavy, output = loaded_heavy(argv)
        assert code == 0, output
        assert heavy == [], argv


@pytest.mark.slow
def test_cached_run_is_light(tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    recipe = tiny_project()
    out = tmp_path / "out"
    code, _, output = loaded_heavy(["run", "-q", str(recipe), "--out", str(out)])
    assert code == 0, output
    # A latency timed while other processes took the CPU is never cached (issue 27): on a
    # busy machine that one stage runs again, and only it.
    stages = json.loads((out / "report.json").read_text())["stages"]
    retimed = sum(1 for s in stages if s["metadata"].get("untrusted"))
    code, heavy, output = loaded_heavy(["run", "-q", str(recipe), "--out", str(out)],
                                       heavy=(*HEAVY, "numpy", "networkx", "filelock"))
    assert code == 0, output
    assert ("0 stages executed" if not retimed else "1 stage(s) executed (1 built)") in output
    # Nothing changed, so each gate's judgement and kept samples come from the memo
    # (cache/memo.py): not even numpy. A latency timed again is read afresh (and locks
    # its device: filelock). The plan is walked without networkx (plan/graph.py).
    assert heavy == ([] if not retimed else [m for m in heavy if m in ("numpy", "filelock")])


@pytest.mark.slow
def test_cached_run_asking_for_an_absent_device_is_light(tiny_project: Callable[..., Path],
                                                         tmp_path: Path) -> None:
    """The phone's "not measurable here" is asked again on every run, in this process
    (execute/remote/probe.py): that must not import a framework either."""
    from tests.conftest import cached_rerun, retimed
    from tests.unit.test_device_probe import phone_project

    recipe = phone_project(tiny_project)
    out = tmp_path / "out"
    code, _, output = loaded_heavy(["run", "-q", str(recipe), "--out", str(out)])
    assert code == 0, output
    busy = retimed(out)
    code, heavy, output = loaded_heavy(["run", "-q", str(recipe), "--out", str(out)])
    assert code == 0, output
    assert cached_rerun(busy) in output
    assert busy or "0 stages executed: nothing to build" in output
    assert heavy == []


def test_every_builtin_profiles_probe_is_light() -> None:
    """What the driver asks each built-in target's backend on every run (the quickstart's
    phone, Mac and Jetson among them) imports no framework."""
    code = ("import sys\n"
            "from edgebuild.core.target import Target\n"
            "from edgebuild.recipe.profiles import BUILTIN_TARGETS, load_profiles\n"
            "from edgebuild.registry import load_backend\n"
            "for name, loaded in load_profiles([BUILTIN_TARGETS]).items():\n"
            "    target = Target(name=name, profile=loaded.profile)\n"
            "    for purpose in ('latency', 'accuracy', 'build'):\n"
            "        load_backend(target.backend).probe(target, purpose)\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
