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
from pathlib import Path
from typing import Any

from edgebuild.cache.store import Artifact
from edgebuild.errors import EdgebuildError
from edgebuild.passes.base import StageContext, TargetInfo
from edgebuild.registry import load_op

# Vendor telemetry is off for edgebuild's own runs: OpenVINO and NNCF send none when
# CI is set (the opt-out file ~/intel/openvino_telemetry is written by setup.sh too).
QUIET_ENV = {"CI": os.environ.get("CI", "true"), "TF_CPP_MIN_LOG_LEVEL": "2",
             "PYTHONWARNINGS": "ignore::DeprecationWarning"}


def run_stage(spec: dict[str, Any]) -> dict[str, Any]:
    op = load_op(spec["op"])()
    params = op.Params.model_validate(spec["params"])
    target = spec.get("target")
    ctx = StageContext(
        stage_id=spec["stage_id"],
        inputs={role: Artifact.from_json(a) for role, a in spec["inputs"].items()},
        out=Path(spec["out"]),
        recipe=spec["recipe"],
        recipe_dir=Path(spec["recipe_dir"]),
        target=TargetInfo(target["name"], target["profile"]) if target else None,
    )
    started = time.perf_counter()
    result = op.run(ctx, params)
    return {
        "status": "unmeasurable" if result.unmeasurable else "ok",
        "reason": result.unmeasurable,
        "main": result.main, "format": result.format, "metadata": result.metadata,
        "seconds": time.perf_counter() - started,
    }


def main(argv: list[str]) -> int:
    spec_path, result_path = Path(argv[0]), Path(argv[1])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    spec = json.loads(spec_path.read_text())
    print(f"edgebuild worker: stage {spec['stage_id']} (op {spec['op']}), pid {os.getpid()}",
          flush=True)
    try:
        result = run_stage(spec)
    except EdgebuildError as exc:
        traceback.print_exc()
        result = {"status": "error", "message": exc.message, "hint": exc.hint}
    except Exception as exc:  # anything from a vendor tool: report, never hide
        traceback.print_exc()
        result = {"status": "error", "message": f"{type(exc).__name__}: {exc}", "hint": ""}
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, default=str))
    tmp.replace(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
