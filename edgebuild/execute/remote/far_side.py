"""The far side of a remote stage task: what runs on the other machine (a Dask worker,
an SSH board), whichever transport brought it (transport.py).

A remote worker trusts no path of the client's. The task brings everything the
stage reads *by content*: its input artifacts' files, and the datasets and model
source files (carry.py rewrote their paths to the task's own `carried/` folder).
Each file is checked against the digest the client recorded before the stage
starts; the stage runs in its own process as it would locally (crash
isolation); the output files travel back as bytes for the client's store to
digest and publish.

    files: {"inputs/<role>/<name>": (sha256, bytes),  "recipe/carried/…": (sha256, bytes)}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgebuild.core.digest import digest_file
from edgebuild.core.stage_result import StageResult
from edgebuild.core.target import WORKER_RESOURCES_ENV
from edgebuild.errors import CacheCorrupt

Files = dict[str, tuple[str, Any]]  # destination -> (sha256, bytes | a Dask future of them)
Sources = dict[str, tuple[str, Path]]  # destination -> (sha256, the client's file)


def task_files(spec: dict[str, Any], carried: Sources) -> Sources:
    """Destination -> (digest, client path) of every file a remote stage needs: its input
    artifacts' files (their manifests hold the digests) and the carried data and model."""
    files = {f"recipe/{rel}": entry for rel, entry in carried.items()}
    for role, artifact in spec["inputs"].items():
        for name, digest in artifact["files"].items():
            files[f"inputs/{role}/{name}"] = (digest, Path(artifact["path"]) / name)
    return files


def unpack(files: Files, root: Path) -> None:
    """Write each file under `root`, refusing any whose content is not what the client sent."""
    for dest, (digest, data) in files.items():
        file = root / dest
        if root.resolve() not in file.resolve().parents:
            raise CacheCorrupt(f"refusing to write {dest!r} outside the task folder")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        if digest_file(file) != digest:
            raise CacheCorrupt(f"{dest} arrived damaged (its digest differs from the "
                               "client's)")


TASK_EVENT = "edgebuild-task"  # Dask event topic: which worker runs which task


def run_remote(spec: dict[str, Any], files: Files, resources: list[str],
               expect_modules: dict[str, str] | None = None,
               timeout_s: float | None = None) -> dict[str, Any]:
    """Run one stage on this (worker) machine; returns result, output files and log.

    It never raises: an exception leaving a Dask task must be pickled back to the
    client, and one that cannot be (a RecursionError's deep traceback, an exception
    holding a lock) left the client waiting forever. Any failure here is a plain
    error reply, in one line, naming this worker.
    """
    announce()
    try:
        return _run_remote(spec, files, resources, expect_modules or {}, timeout_s)
    except Exception as exc:  # nothing may reach Dask's pickler
        where = _worker_address() or "?"
        return {"result": StageResult.error(
                    f"the task failed on worker {where}: {describe(exc)}",
                    "the worker's own code failed, not the stage's; its Dask log may say "
                    "more").model_dump(mode="json"),
                "files": {}, "log": "", "worker": where}


def describe(exc: BaseException) -> str:
    """`Type: text` on one line, at most 300 characters, whatever the exception does."""
    try:
        text = " ".join(str(exc).split())
    except Exception:  # a __str__ that fails (or recurses)
        text = "(its text cannot be shown)"
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _run_remote(spec: dict[str, Any], files: Files, resources: list[str],
                expect_modules: dict[str, str], timeout_s: float | None) -> dict[str, Any]:
    from edgebuild.execute.logs import one_line_logs
    from edgebuild.execute.remote.carry import check_modules
    from edgebuild.execute.task import run_in_subprocess
    from edgebuild.execute.taskdirs import new_task_folder, remove_tree

    one_line_logs()
    root = new_task_folder()  # removed below; a killed worker's, by the next task
    try:
        unpack(files, root)
        recipe_dir = root / "recipe"
        recipe_dir.mkdir(exist_ok=True)
        skew = check_modules(expect_modules, recipe_dir)
        if skew:
            return {"result": StageResult.error(
                        skew, "the worker imports its own installed packages").model_dump(
                        mode="json"), "files": {}, "log": "", "worker": _worker_address()}
        spec = {**spec, "recipe_dir": str(recipe_dir),
                "inputs": {role: {**a, "path": str(root / "inputs" / role)}
                           for role, a in spec["inputs"].items()}}
        out = root / "out"
        out.mkdir()
        spec["out"] = str(out)
        log = root / "stage.log"
        result = run_in_subprocess(spec, log, root / "scratch",
                                   {WORKER_RESOURCES_ENV: ",".join(resources)},
                                   _nanny_env(), timeout_s, f" on worker {_worker_address()}")
        outputs = {}
        if result.status == "ok":
            outputs = {p.relative_to(out).as_posix(): p.read_bytes()
                       for p in sorted(out.rglob("*")) if p.is_file()}
        # plain data on the wire: the client checks it as a WorkerReturn (returned.py)
        return {"result": result.model_dump(mode="json"), "files": outputs,
                "log": log.read_text(errors="replace") if log.is_file() else "",
                "worker": _worker_address()}
    finally:
        remove_tree(root)


def announce() -> None:
    """Tell the scheduler this worker runs the current task, so a client that never gets
    the task's reply can still say where it ran (dask.py)."""
    try:
        from distributed import get_worker

        worker = get_worker()
        worker.log_event(TASK_EVENT, {"key": str(worker.get_current_task()),
                                      "worker": str(worker.address)})
    except (ImportError, ValueError, AttributeError):
        pass  # not on a Dask worker (an SSH board, a test)


def _nanny_env() -> tuple[str, ...]:
    """The variables a Dask nanny sets in its worker (OMP_NUM_THREADS=1 and the like):
    the stage gets the machine's own, as a local run does, not the worker's caps (one
    thread changes what ONNX Runtime's optimizer writes, and every latency)."""
    import os

    try:
        import dask

        caps = dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}
    except ImportError:
        return ()
    return tuple(k for k, v in caps.items() if os.environ.get(k) == str(v))


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return ""
