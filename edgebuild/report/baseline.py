"""Read a previous run's report: its builds' manifests (for `run --baseline`) and its
samples (`compare`)."""

from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from edgebuild.core.digest import digest_file
from edgebuild.core.manifest import MANIFEST_NAME, REBUILD_HINT, read_manifest, verified_files
from edgebuild.core.paths import confined
from edgebuild.errors import EdgebuildError
from edgebuild.report.model import Report

log = logging.getLogger(__name__)

def load_report(path: Path) -> Report:
    try:
        return Report.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise EdgebuildError(f"{path}: report not found",
                             "pass the report.json of an earlier `edgebuild run`") from None
    except (ValidationError, ValueError) as exc:
        raise EdgebuildError(f"{path}: not an edgebuild report ({str(exc).splitlines()[0]})",
                             "it may come from an incompatible edgebuild version") from None


def baseline_artifacts(path: Path, backends: dict[str, str] | None = None
                       ) -> dict[str, dict[str, Any]]:
    """Target -> params of its `import-baseline` stage (measuring/import_baseline.py), for every
    baseline target that shipped an artifact: its manifest, read and checked here (schema,
    confined names, every file's size and digest), so a bad baseline is a usage error
    before anything runs. `backends` (target -> this recipe's backend): a target whose
    baseline another backend built is left out, with a warning.
    """
    report = load_report(path)
    found: dict[str, dict[str, Any]] = {}
    for target in report.targets:
        if target.artifact is None:
            continue
        # The main file's folder (the main file may be a folder itself: an .mlpackage).
        folder = confined(path.parent, PurePosixPath(target.artifact).parent.as_posix(),
                          f"{path}: an artifact path")
        manifest_path = folder / MANIFEST_NAME
        manifest = read_manifest(manifest_path)
        if manifest.target != target.name:
            raise EdgebuildError(f"{manifest_path}: describes target '{manifest.target}', "
                                 f"the report puts it under '{target.name}'", REBUILD_HINT)
        verified_files(folder, manifest, where=manifest_path)
        wanted = (backends or {}).get(target.name, manifest.backend)
        if wanted != manifest.backend:
            log.warning("--baseline: not comparing target '%s': the baseline was built by "
                        "%s, this recipe builds it with %s", target.name, manifest.backend,
                        wanted)
            continue
        found[target.name] = {"manifest": str(manifest_path.resolve()),
                              "digest": digest_file(manifest_path)}
    return found


def latency_samples(report: Report) -> dict[str, list[float]]:
    """Target (`target[profile]` with shape profiles) -> the latency samples a report
    carries (subsampled, in time order)."""
    return {g.target + g.gate.removeprefix("latency"): g.details["samples_ms"]
            for g in report.gates if g.is_latency and g.details.get("samples_ms")}
