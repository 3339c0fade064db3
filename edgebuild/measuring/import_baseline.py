"""import-baseline: an earlier build, read from its manifest, as an input artifact.

`run --baseline REPORT` plans, for each target it compares, one `import-baseline@T`
stage whose artifact is the baseline build's files plus the metadata its runner needs
(`runner_metadata` of the manifest, as far as the target's backend declares it in
`Backend.runner_metadata`). `compare-latency@T` takes it as its `baseline` input, like
`compare-speed` takes another target's build, so it travels to a remote worker as any
input artifact does (by content, digest-checked), and a backend that builds on the
device gets a `device-build` of it, so both sides are timed as what the device runs::

    import-baseline@T ─(device-build[baseline]@T)─┐
    compile@T ─(device-build@T)───────────────────┴─ compare-latency@T

The manifest is untrusted input: every name is confined, and the copies — not the
originals, which could change in between — are checked against its sizes and digests.
The driver imports it into the store before the run (run/driver.py), so the stage is a
cache hit wherever stages run; run here, the stage does the same import.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.core.digest import digest_file
from edgebuild.core.manifest import SHA256, read_manifest, verified_files
from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.core.paths import confined
from edgebuild.errors import EdgebuildError, StageError
from edgebuild.registry import backend_class


class ImportParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    manifest: str = Field(description="The baseline's manifest.json (absolute path).")
    digest: str = Field(pattern=SHA256, description="sha256 of that manifest: the key "
                        "follows the baseline's content.")


class ImportBaseline(Op):
    name = "import-baseline"
    version = 1
    Params: ClassVar[type[BaseModel]] = ImportParams
    accepts = ("*",)
    produces = "baseline"
    target_specific = True
    summary = "an earlier build, from its manifest (files and digests checked), for --baseline"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        assert ctx.target is not None
        try:
            return import_build(params, ctx.target.backend, ctx.out)
        except EdgebuildError as exc:
            raise StageError(exc.message, exc.hint) from None


def import_build(params: ImportParams, backend: str, out: Path) -> OpResult:
    """Copy the baseline's files into `out`, check the copies, and return the artifact
    (its format, main file and the runner metadata `backend` declares)."""
    path = Path(params.manifest)
    if not path.is_file() or digest_file(path) != params.digest:
        raise EdgebuildError(f"{path}: the baseline's manifest changed (or went) since this "
                             "run read it", "run again with the baseline left in place")
    manifest = read_manifest(path)
    if manifest.backend != backend:
        raise EdgebuildError(f"{path}: the baseline was built by backend {manifest.backend}, "
                             f"this target by {backend}: one runner cannot time both",
                             "compare builds of the same backend")
    for entry in manifest.files:
        source = confined(path.parent, entry.name, f"{path}: a file name")
        if not source.is_file():
            raise EdgebuildError(f"{path}: file {entry.name} is missing",
                                 "keep the whole artifacts/<target>/ folder of the build")
        copy = confined(out, entry.name, f"{path}: a file name")
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copy)
    verified_files(out, manifest, where=path)
    declared = backend_class(backend).runner_metadata
    return OpResult(main=manifest.main, format=manifest.format, metadata={
        **{k: v for k, v in manifest.runner_metadata.items() if k in declared},
        "ships": manifest.ships,
        "baseline": {"recipe": manifest.recipe, "target": manifest.target,
                     "stage": manifest.stage, "stage_key": manifest.stage_key,
                     "edgebuild_version": manifest.edgebuild_version,
                     "manifest": str(path)}})
