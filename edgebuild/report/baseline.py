"""Read a previous run's report: its artifacts (for `run --baseline`) and samples (`compare`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from edgebuild.core.digest import digest_file, digest_json
from edgebuild.errors import EdgebuildError
from edgebuild.report.model import Report

# Compile-stage metadata a backend's runner reads (TFLite: the tensor mapping).
RUNNER_METADATA = ("io",)


def load_report(path: Path) -> Report:
    try:
        return Report.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise EdgebuildError(f"{path}: report not found",
                             "pass the report.json of an earlier `edgebuild run`") from None
    except (ValidationError, ValueError) as exc:
        raise EdgebuildError(f"{path}: not an edgebuild report ({str(exc).splitlines()[0]})",
                             "it may come from an incompatible edgebuild version") from None


def baseline_artifacts(path: Path) -> dict[str, dict[str, Any]]:
    """Target -> CompareLatency params, for every baseline target that has an artifact."""
    report = load_report(path)
    found: dict[str, dict[str, Any]] = {}
    for target in report.targets:
        if target.artifact is None or target.format is None:
            continue
        main = path.parent / target.artifact
        folder = main.parent
        if not main.is_file():
            raise EdgebuildError(f"{path}: the baseline artifact {main} is missing",
                                 "keep the whole --out folder of the baseline run")
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        digest = digest_json([[str(f.relative_to(folder)), digest_file(f)] for f in files])
        compiled = next((s.metadata for s in report.stages
                         if s.id == f"compile@{target.name}"), {})
        found[target.name] = {"path": str(folder.resolve()), "main": main.name,
                              "format": target.format, "digest": digest,
                              "runner_metadata": {k: compiled[k] for k in RUNNER_METADATA
                                                  if k in compiled}}
    return found


def latency_samples(report: Report) -> dict[str, list[float]]:
    """Target (`target[profile]` with shape profiles) -> the latency samples a report
    carries (subsampled, in time order)."""
    return {g.target + g.gate.removeprefix("latency"): g.details["samples_ms"]
            for g in report.gates if g.is_latency and g.details.get("samples_ms")}
