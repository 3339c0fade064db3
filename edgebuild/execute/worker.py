"""Run one stage from a JSON spec, in its own process.

`run_stage` is a pure function of plain data (spec in, result dict out), so
the same code runs in a local subprocess or on a remote Dask worker. The
process boundary is what lets a segfault inside a vendor converter fail one
stage instead of killing the whole build.

    python -m edgebuild.execute.worker SPEC.json RESULT.json
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.artifact import Artifact
from edgebuild.core.op import IoSpec, StageContext
from edgebuild.core.share_cpu import sessions_yield_when_idle
from edgebuild.core.stage_result import StageResult
from edgebuild.core.target import Target
from edgebuild.errors import EdgebuildError, plain
from edgebuild.registry import load_op

if TYPE_CHECKING:
    from edgebuild.core.samples import Samples

# Vendor telemetry is off for edgebuild's own runs: OpenVINO and NNCF send none when
# CI is set (the opt-out file ~/intel/openvino_telemetry is written by setup.sh too).
QUIET_ENV = {"CI": os.environ.get("CI", "true"), "TF_CPP_MIN_LOG_LEVEL": "2",
             "PYTHONWARNINGS": "ignore::DeprecationWarning"}


def run_stage(spec: dict[str, Any]) -> StageResult:
    op = load_op(spec["op"])()
    params = op.Params.model_validate(spec["params"])
    target = spec.get("target")
    io = IoSpec(inputs=spec["io"]["inputs"], outputs=spec["io"]["outputs"],
                shapes=spec["io"].get("shapes", {}), folded=spec["io"].get("folded", []),
                state=spec["io"].get("state", []))
    recipe_dir = Path(spec["recipe_dir"])
    ctx = StageContext(
        stage_id=spec["stage_id"],
        out=Path(spec["out"]),
        io=io,
        recipe_dir=recipe_dir,
        target=Target.model_validate(target) if target else None,
        artifacts={role: Artifact.from_json(a) for role, a in spec["inputs"].items()},
        datasets={name: _loader(name, data, recipe_dir, io)
                  for name, data in spec["datasets"].items()},
        source=spec.get("source"),
    )
    started = time.perf_counter()
    from edgebuild.customops.declared import activated

    with activated(spec.get("custom_ops"), recipe_dir):
        result = op.run(ctx, params)
    seconds = time.perf_counter() - started
    if result.unmeasurable:
        return StageResult.unmeasurable(result.unmeasurable)
    return StageResult.ok(result.main, result.format, result.metadata, seconds)


def context_from_recipe(stage_id: str, inputs: dict[str, Artifact], out: Path,
                        recipe: dict[str, Any], recipe_dir: Path,
                        target: Target | None = None) -> StageContext:
    """A context with the whole recipe declared: for scripts, benchmarks and tests that
    run one op directly, outside a plan (a planned stage gets only what it declared).

    `recipe` is plain data with `inputs`, `outputs` and optionally `shapes`, `model` and
    `datasets`.
    """
    io = IoSpec(inputs=recipe["inputs"], outputs=recipe["outputs"],
                shapes=recipe.get("shapes", {}), state=recipe.get("state", []))
    return StageContext(
        stage_id=stage_id, out=out, io=io, recipe_dir=recipe_dir, target=target,
        artifacts=dict(inputs),
        datasets={name: _loader(name, data, recipe_dir, io)
                  for name, data in recipe.get("datasets", {}).items()},
        source=recipe.get("model"))


def _loader(name: str, data: dict[str, Any], recipe_dir: Path,
            io: IoSpec) -> Callable[[], Samples]:
    """Loads a declared dataset when the stage first asks for it."""

    def load() -> Samples:
        from pydantic import TypeAdapter

        from edgebuild.data.loaders import (
            as_declared,
            check_matches_inputs,
            load_dataset,
            without_folded,
        )
        from edgebuild.recipe.datasets import DatasetSpec

        spec: DatasetSpec = TypeAdapter(DatasetSpec).validate_python(data)
        samples = load_dataset(spec, recipe_dir, [t["name"] for t in io.inputs], name)
        samples = without_folded(samples, {t["name"]: t["value"] for t in io.folded}, name)
        steps = None
        if spec.stream is not None:
            from edgebuild.data.stream import declared_steps

            steps = declared_steps(spec.stream, spec.input, io.inputs, name, samples)
        check_matches_inputs(samples, io.inputs, name, steps)
        return as_declared(samples, io.inputs, steps)

    return load


PARENT_ENV = "EDGEBUILD_PARENT_PID"


def die_with_parent() -> None:
    """Be SIGKILLed when the process that started this worker dies (Linux prctl).

    A worker orphaned by a killed `edgebuild run` would otherwise keep converting,
    or keep timing after the device lock it ran under was released. Asked for by
    the worker itself (preexec_fn is unsafe in a threaded parent), then checked:
    if the parent died before the request, the worker has been re-parented already.
    """
    expected = os.environ.get(PARENT_ENV)
    if sys.platform != "linux" or not expected:
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if str(os.getppid()) != expected:
        # Said, not silent: a stage log that is empty but for this line tells a parent
        # that is alive after all (seen once on the emulated board) from a crash.
        sys.stderr.write(f"edgebuild worker: started by pid {expected}, but its parent is "
                         f"now pid {os.getppid()}: that process is gone, so the stage stops\n")
        sys.stderr.flush()
        os._exit(1)


def _explain(exc: Exception) -> dict[str, str]:
    """What the user can do about an unexpected exception, where we can tell."""
    import errno

    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return {"message": f"the disk is full ({exc.filename or 'while writing'})",
                "hint": "free space where the cache and --out live (`edgebuild cache gc`)"}
    if isinstance(exc, MemoryError) or "bad_alloc" in str(exc):
        return {"message": f"out of memory: {type(exc).__name__}: {exc}",
                "hint": "a smaller batch, fewer threads or calibration samples, or a bigger "
                        "machine"}
    return {"message": f"{type(exc).__name__}: {exc}", "hint": ""}


def main(argv: list[str]) -> int:
    import faulthandler

    die_with_parent()
    # A converter that crashes (SIGSEGV in TFLite's, QNN's or OpenVINO's native code)
    # leaves the Python stack it crashed under in the log: task.crash_site reads it.
    faulthandler.enable(file=sys.stdout, all_threads=False)
    spec_path, result_path = Path(argv[0]), Path(argv[1])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    spec = json.loads(spec_path.read_text())
    sessions_yield_when_idle()
    print(f"edgebuild worker: stage {spec['stage_id']} (op {spec['op']}), pid {os.getpid()}",
          flush=True)
    try:
        result = run_stage(spec)
    except EdgebuildError as exc:
        traceback.print_exc()
        result = StageResult.error(exc.message, exc.hint, getattr(exc, "metadata", None))
    except Exception as exc:  # anything from a vendor tool: report, never hide
        traceback.print_exc()
        explained = _explain(exc)
        result = StageResult.error(explained["message"], explained["hint"])
    # A converter's terminal colours never reach a message.
    result = result.model_copy(update={k: plain(getattr(result, k))
                                       for k in ("message", "hint", "reason")})
    tmp = result_path.with_suffix(".tmp")
    # default=str: a metadata value JSON cannot hold (a Path) is written as its text
    tmp.write_text(json.dumps(result.model_dump(), default=str))
    tmp.replace(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
