"""`edgebuild profile` and `edgebuild compare`'s per-op view on ONNX Runtime, through the
real CLI on a small real conv net (issue 32)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgebuild.measure.record import OpProfile
from tests.conftest import edgebuild
from tests.integration.profile_models import HIGH, LOW, read_report, write_project

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytestmark = pytest.mark.onnxruntime


@pytest.mark.slow
def test_profile_builds_and_profiles_only_what_the_targets_need(tmp_path: Path) -> None:
    # `host-cpu` sets measure.profile and has a memory gate; `plain` (same profile and
    # backend) profiles nothing in a run: `edgebuild profile` profiles it all the same.
    recipe = write_project(tmp_path / "project", "host-cpu")
    cache, out = tmp_path / "cache", tmp_path / "prof"
    done = edgebuild("profile", str(recipe), "--target", "plain", "--target", "host-cpu",
                     "--out", str(out), "--cache-dir", str(cache), "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "time by op type" in done.stdout and "top 10 operators" in done.stdout
    assert "per-op: host-cpu (A) vs plain (B)" in done.stdout  # one profile, one backend
    for target in ("plain", "host-cpu"):
        profile = OpProfile.model_validate_json((out / f"profile-{target}.json").read_text())
        assert profile.rows and profile.source == "onnxruntime profiler"
        assert profile.ops_ms is not None and profile.wall_ms
        assert LOW <= profile.ops_ms / profile.wall_ms <= HIGH
        assert next(iter(profile.by_type())) == "Conv"  # four convs: most of the time
    report = read_report(out)
    ops = sorted(s["op"] for s in report["stages"])
    assert ops == ["compile", "compile", "import-onnx", "measure-latency", "measure-latency"]
    params = {s["id"]: s for s in report["stages"]}
    assert params["measure-latency@plain"]["metadata"]["profile"]["rows"]
    assert all(t["gates"] == [] for t in report["targets"])  # gates set aside: no verdict
    summary = (out / "summary.md").read_text()
    assert "### Per-op comparison: host-cpu (A) vs plain (B)" in summary
    assert "Per-op comparisons" in (out / "report.html").read_text()

    # The same command again: the build is cached (the profile too, unless others took
    # the CPU while it was timed: such a figure is never cached, gates/noisy.py).
    again = edgebuild("profile", str(recipe), "--target", "plain", "--out",
                      str(tmp_path / "again"), "--cache-dir", str(cache))
    assert again.returncode == 0, again.stdout + again.stderr
    outcomes = {s["id"]: s["outcome"] for s in read_report(tmp_path / "again")["stages"]}
    # Its progress counts the stages of the plan the driver built: [n/3], every line.
    totals = {line.split("/")[1].split("]")[0] for line in again.stderr.splitlines()
              if line.startswith("[")}
    assert totals == {str(len(outcomes))}, again.stderr
    assert outcomes["compile@plain"] == outcomes["import-onnx"] == "cached"

    # A full run of the recipe reuses the profile's build; compare shows per-op tables.
    run = tmp_path / "run"
    built = edgebuild("run", str(recipe), "--out", str(run), "--cache-dir", str(cache), "-q")
    assert built.returncode == 0, built.stdout + built.stderr
    stages = {s["id"]: s["outcome"] for s in read_report(run)["stages"]}
    assert stages["compile@host-cpu"] == stages["compile@plain"] == "cached"
    compared = edgebuild("compare", str(run / "report.json"), str(out / "report.json"))
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "per-op: base host-cpu (A) vs head host-cpu (B)" in compared.stdout
    assert "Conv" in compared.stdout and "B/A" in compared.stdout


def test_profile_refuses_an_unknown_target(tmp_path: Path) -> None:
    recipe = write_project(tmp_path / "project", "host-cpu")
    done = edgebuild("profile", str(recipe), "--target", "host-cpux",
                     "--cache-dir", str(tmp_path / "cache"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "host-cpu" in done.stderr and "Traceback" not in done.stderr
    assert not json.dumps(done.stdout).count("time by op type")
