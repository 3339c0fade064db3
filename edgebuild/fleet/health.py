"""The agent's default health check, run as `python -m edgebuild.fleet.health RELEASE`:
load the release's model with edgebuild's runner for its backend and run one inference
on zeros. A subprocess, so the agent itself never imports numpy or a runtime, and a
runtime that crashes takes only the check with it.

Exit: 0 healthy, 1 unhealthy (the reason on stdout), 75 not checkable here (the
backend or its runtime is not installed, or cannot run on this machine: skipped with
that reason, never called healthy).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

HEALTHY: Final = 0
UNHEALTHY: Final = 1
SKIPPED: Final = 75  # EX_TEMPFAIL


def check(release: Path) -> tuple[int, str]:
    """(exit code, one line) for the release folder `release` (files/, manifest.json)."""
    from edgebuild.core.manifest import read_manifest, verified_files
    from edgebuild.errors import EdgebuildError

    try:
        manifest = read_manifest(release / "manifest.json")
        verified_files(release / "files", manifest)
    except EdgebuildError as exc:
        return UNHEALTHY, f"the release's files are not what its manifest says: {exc}"
    try:
        import numpy as np

        from edgebuild.core.artifact import Artifact
        from edgebuild.core.profile import RunsOn
        from edgebuild.core.target import Target
        from edgebuild.registry import load_backend

        backend = load_backend(manifest.backend)
        # The agent runs on the device: the profile's `runs_on` (how the build host
        # reached it: ssh, dask) does not apply here; the device's arch still does.
        profile = manifest.profile.model_copy(update={"runs_on": RunsOn()})
        target = Target(name=manifest.target, profile=profile)
        why = backend.probe(target, "accuracy")
    except (ImportError, EdgebuildError) as exc:
        return SKIPPED, f"backend {manifest.backend} cannot be loaded here: {exc}"
    if why:
        return SKIPPED, f"backend {manifest.backend} cannot run here: {why}"
    artifact = Artifact(key=manifest.stage_key, format=manifest.format, path=release / "files",
                        files={f.name: f.sha256 for f in manifest.files},
                        sizes={f.name: f.size for f in manifest.files},
                        metadata={**manifest.runner_metadata, "main": manifest.main})
    built = release / "engine" / "model.engine"  # built on this device (fleet/jetson.py)
    if manifest.backend == "tensorrt" and built.is_file():
        artifact = Artifact(key=manifest.stage_key, format="tensorrt-engine",
                            path=built.parent, files={}, sizes={},
                            metadata={**manifest.runner_metadata, "main": built.name})
    try:
        with backend.runner(artifact, target, 1) as runner:
            feeds = {name: np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in shape],
                                    dtype=dtype)
                     for name, (shape, dtype) in runner.input_metadata().items()}
            outputs = runner.infer(feeds)
    except ImportError as exc:
        return SKIPPED, f"the {manifest.backend} runtime is not installed: {exc}"
    except Exception as exc:  # any failure to load or run the model is "unhealthy"
        first = str(exc).splitlines()[0] if str(exc) else ""
        return UNHEALTHY, f"{manifest.backend} could not run the model: " \
                          f"{type(exc).__name__}: {first[:300]}"
    if not outputs:
        return UNHEALTHY, "the model ran but returned no output"
    bad = [n for n, v in outputs.items() if v.dtype.kind == "f" and not np.isfinite(v).all()]
    if bad:
        return UNHEALTHY, f"outputs {bad} are not finite on zeros"
    shapes = ", ".join(f"{n} {list(v.shape)}" for n, v in outputs.items())
    return HEALTHY, f"{manifest.backend} loaded {manifest.main} and ran one inference ({shapes})"


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m edgebuild.fleet.health RELEASE_FOLDER")
        return 2
    code, line = check(Path(sys.argv[1]))
    print(line)
    return code


if __name__ == "__main__":
    sys.exit(main())
