"""The worker side of a stage task that runs on another machine (a Dask worker).

A remote worker trusts no path of the client's: the task brings its input
artifacts *by content* (file bytes, transferred by Dask), each file is checked
against the digest the client's store recorded before the stage starts, the
stage runs in its own process as it would locally (crash isolation), and the
output files travel back as bytes for the client's store to digest and publish.

Datasets and the model source are still read by path (their digests are in the
key on the client): on another machine they must be at the same paths, e.g. a
shared folder (docs/distributed.md).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from edgebuild.core.digest import digest_file
from edgebuild.core.target import WORKER_RESOURCES_ENV
from edgebuild.errors import CacheCorrupt

Payload = dict[str, dict[str, bytes]]  # input role -> file name -> bytes


def pack_inputs(spec: dict[str, Any]) -> Payload:
    """The input artifacts' files, read on the client."""
    payload: Payload = {}
    for role, artifact in spec["inputs"].items():
        folder = Path(artifact["path"])
        payload[role] = {name: (folder / name).read_bytes() for name in artifact["files"]}
    return payload


def run_remote(spec: dict[str, Any], payload: Payload,
               resources: list[str]) -> dict[str, Any]:
    """Run one stage on this (worker) machine; returns result, output files and log."""
    from edgebuild.execute.task import run_in_subprocess

    root = Path(tempfile.mkdtemp(prefix="edgebuild-task-"))
    try:
        spec = {**spec, "inputs": {role: dict(a) for role, a in spec["inputs"].items()}}
        for role, artifact in spec["inputs"].items():
            folder = root / "inputs" / role
            for name, data in payload[role].items():
                file = folder / name
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(data)
                if digest_file(file) != artifact["files"][name]:
                    raise CacheCorrupt(f"input '{role}' file {name} arrived damaged "
                                       "(its digest differs from the client's store)")
            artifact["path"] = str(folder)
        out = root / "out"
        out.mkdir()
        spec["out"] = str(out)
        log = root / "stage.log"
        result = run_in_subprocess(spec, log, root / "scratch",
                                   {WORKER_RESOURCES_ENV: ",".join(resources)})
        files = {}
        if result.get("status") == "ok":
            files = {p.relative_to(out).as_posix(): p.read_bytes()
                     for p in sorted(out.rglob("*")) if p.is_file()}
        return {"result": result, "files": files,
                "log": log.read_text(errors="replace") if log.is_file() else "",
                "worker": _worker_address()}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return ""
