"""The quickstart to a fleet (issue 33's "done when"): the session's real build of
recipes/quickstart.yaml (tests/conftest.py: quickstart_build, shared with
tests/e2e/test_recipes.py so CI builds it once) published to a real registry (Debian's
`docker-registry` on 127.0.0.1), promoted, and three agents — host-cpu (ONNX Runtime),
intel-cpu (OpenVINO), android (TFLite) — each select and activate their own variant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgebuild.core.manifest import read_manifest
from tests.conftest import SessionBuild, edgebuild, skip_if_the_machine_was_busy
from tests.integration.fleet.conftest import REGISTRY, active_target, ok, state

pytestmark = pytest.mark.slow
AGENTS = ("host-cpu", "intel-cpu", "android")


def test_the_quickstart_reaches_three_kinds_of_device(
        registry: tuple[str, Path], quickstart_build: SessionBuild,
        keys: dict[str, Path], tmp_path: Path) -> None:
    assert REGISTRY is not None  # the registry fixture skipped otherwise
    quickstart_build.skip_if_busy()  # a release is judged as a whole
    out = quickstart_build.out
    if json.loads((out / "report.json").read_text())["exit_code"] != 0:
        skip_if_the_machine_was_busy(out)  # a later re-run under load may have failed it
    url, _ = registry
    repository = f"{url}/fleet/quickstart"
    text = ok(edgebuild("publish", str(out), "--to", repository, "--version", "1.0.0"))
    published = {line.split()[1] for line in text.splitlines()
                 if line.strip().startswith("published")}
    assert set(AGENTS) <= published, text
    ok(edgebuild("promote", f"{repository}:1.0.0", "production", "--key",
                 str(keys["release"])))
    for target in AGENTS:
        root = tmp_path / target
        done = ok(edgebuild("agent", "--from", repository, "--channel", "production",
                            "--target", target, "--root", str(root), "--trust",
                            str(keys["trusted"]), "--once"))
        assert "1.0.0 activated (sequence " in done
        assert active_target(root) == target
        shipped = read_manifest(out / "artifacts" / target / "manifest.json")
        active = read_manifest(root / "current" / "manifest.json")
        assert active.stage_key == shipped.stage_key and active.files == shipped.files
        main = root / "current" / "files" / shipped.main
        assert main.stat().st_size == next(f.size for f in shipped.files
                                           if f.name == shipped.main)
        release = state(root)["active"]
        assert release["backend"] == shipped.backend
        assert release["downloaded_bytes"] >= shipped.size_bytes
        # The model check loads the model with edgebuild's runner for the backend (the
        # phone's TFLite variant: the TFLite interpreter, which runs on this host too).
        assert "ran one inference" in state(root)["reason"], state(root)["reason"]
