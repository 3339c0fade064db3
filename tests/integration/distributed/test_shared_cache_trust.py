"""Attacks on a shared store (issue 28: 2, 3, 4, 10), each run through the real CLI.

Machine A builds and uploads; an attacker who can write the store then poisons
it; machine B (an empty local cache) runs the same recipe. On main each attack
worked: a file written outside the cache, a local secret in the reports, the
attacker's model shipped with every gate passed, a forged reference. Now each
entry is refused with one warning and built locally, nothing is written outside
the run's folders, and B ends with A's digests.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import TINY_RECIPE, edgebuild, make_tiny_onnx

pytest.importorskip("fsspec", reason="--shared-cache needs fsspec (extra: distributed)")
pytest.importorskip("cryptography", reason="signed shared caches need cryptography")
pytestmark = pytest.mark.distributed


def stages(out: Path) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in json.loads((out / "report.json").read_text())["stages"]}


def run(recipe: Path, out: Path, cache: Path, *extra: str) -> tuple[dict[str, dict[str, Any]],
                                                                     str]:
    result = edgebuild("run", str(recipe), "--out", str(out), "--cache-dir", str(cache), *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return stages(out), result.stderr


def entry(team: Path, key: str) -> Path:
    return team / "objects" / key[:2] / key


def poison(folder: Path, edit: Callable[[dict[str, Any]], None],
           files: dict[str, bytes] | None = None) -> None:
    """What a store writer can do: replace files, then make the manifest consistent
    with them (digests and sizes), and edit anything else in it."""
    manifest = json.loads((folder / "artifact.json").read_text())
    for name, data in (files or {}).items():
        (folder / name).write_bytes(data)
        manifest["files"][name] = hashlib.sha256(data).hexdigest()
        manifest["sizes"][name] = len(data)
    edit(manifest)
    (folder / "artifact.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def machine_a(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path,
                                                                dict[str, dict[str, Any]]]:
    """(recipe, config dir, the team store, A's stages): machine A built and uploaded
    everything, once for the module; each test poisons a copy of the store (`built`)."""
    root = tmp_path_factory.mktemp("machine-a")
    project = root / "project"
    project.mkdir()
    make_tiny_onnx(project / "tiny.onnx")
    rng = np.random.default_rng(0)
    np.savez(project / "samples.npz", x=rng.standard_normal((16, 4)).astype(np.float32),
             y=rng.integers(0, 3, 16))
    recipe = project / "tiny.yaml"
    recipe.write_text(textwrap.dedent(TINY_RECIPE))
    config, team = root / "config", root / "team-cache"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_CONFIG_HOME", str(config))
        env.setenv("EDGEBUILD_QUIET_WAIT_S", os.environ.get("EDGEBUILD_QUIET_WAIT_S", "3"))
        first, _ = run(recipe, root / "a", root / "cache", "--shared-cache", str(team))
    return recipe, config, team, first


@pytest.fixture
def built(machine_a: tuple[Path, Path, Path, dict[str, dict[str, Any]]], tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, dict[str, dict[str, Any]]]:
    """(recipe, this test's copy of the team store, machine A's stages). A and B are one
    user here (A's config dir, so A's key), so B trusts A."""
    recipe, config, team, first = machine_a
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    copy = tmp_path / "team-cache"
    shutil.copytree(team, copy)
    return recipe, copy, first


def unsigned(manifest: dict[str, Any]) -> None:
    manifest.pop("signature", None)


@pytest.mark.slow
def test_absolute_and_parent_names_are_refused_before_a_byte_is_written(
        built: tuple[Path, Path, dict[str, dict[str, Any]]], tmp_path: Path) -> None:
    recipe, team, first = built
    absolute = tmp_path / "outside" / "absolute.txt"
    climbing = "../../../../climbed.txt"
    folder = entry(team, first["onnx-optimize"]["key"])
    data = b"written by the store's owner"
    digest = hashlib.sha256(data).hexdigest()

    def names(manifest: dict[str, Any]) -> None:
        for name in (str(absolute), climbing):
            manifest["files"][name] = digest
            manifest["sizes"][name] = len(data)

    poison(folder, names)
    (folder / "climbed.txt").write_bytes(data)
    second, stderr = run(recipe, tmp_path / "b", tmp_path / "machine-b",
                         "--shared-cache", str(team), "--shared-cache-trust", "any")
    assert second["onnx-optimize"]["outcome"] == "built"
    assert second["onnx-optimize"]["artifact_digest"] == first["onnx-optimize"][
        "artifact_digest"]
    assert "not a plain relative path" in stderr
    assert not absolute.exists()
    found = [*tmp_path.parent.glob("climbed.txt"), *tmp_path.rglob("climbed.txt")]
    assert found == [folder / "climbed.txt"]  # only the attacker's own copy


@pytest.mark.slow
def test_notes_naming_a_local_file_never_reach_the_reports(
        built: tuple[Path, Path, dict[str, dict[str, Any]]], tmp_path: Path) -> None:
    recipe, team, first = built
    secret = tmp_path / "secrets.env"
    secret.write_text("API_TOKEN=hunter2-do-not-leak\n")

    def notes(manifest: dict[str, Any]) -> None:
        manifest["metadata"]["notes"] = [str(secret), "../../../../" + secret.name]
        unsigned(manifest)

    poison(entry(team, first["compile@host-cpu"]["key"]), notes)
    out = tmp_path / "b"
    # `any`: the confinement holds without signatures (a private store's owner can err).
    second, stderr = run(recipe, out, tmp_path / "machine-b", "--shared-cache", str(team),
                         "--shared-cache-trust", "any")
    assert second["compile@host-cpu"]["outcome"] == "built"
    for report in ("summary.md", "report.json", "report.html", "junit.xml"):
        assert "hunter2" not in (out / report).read_text(), report
    assert stderr.count("refusing entry") == 1


@pytest.mark.slow
@pytest.mark.parametrize("signer", ["none", "attacker"])
def test_a_swapped_model_with_consistent_digests_is_refused(
        built: tuple[Path, Path, dict[str, dict[str, Any]]], tmp_path: Path,
        signer: str) -> None:
    recipe, team, first = built
    compiled = first["compile@host-cpu"]
    folder = entry(team, compiled["key"])
    model = json.loads((folder / "artifact.json").read_text())["metadata"]["main"]
    evil = make_tiny_onnx(tmp_path / "evil.onnx", scale=-3.0).read_bytes()
    edit = unsigned
    if signer == "attacker":
        from edgebuild.cache.signing import generate

        attacker = generate(tmp_path / "attacker" / "key.pem")

        def edit(manifest: dict[str, Any]) -> None:  # signed, by a key B does not trust
            manifest["signature"] = attacker.sign(
                manifest["key"], manifest["format"], manifest["files"], manifest["sizes"],
                manifest["metadata"]).model_dump()
    poison(folder, edit, {model: evil})
    second, stderr = run(recipe, tmp_path / "b", tmp_path / "machine-b",
                         "--shared-cache", str(team))
    assert second["compile@host-cpu"]["outcome"] == "built"
    assert second["compile@host-cpu"]["artifact_digest"] == compiled["artifact_digest"]
    shipped = next((tmp_path / "b" / "artifacts" / "host-cpu").glob("*.onnx")).read_bytes()
    assert shipped != evil
    why = "unsigned" if signer == "none" else "is not a trusted key"
    assert stderr.count("refusing entry") == 1 and why in stderr
    verify = edgebuild("cache", "verify", "--cache-dir", str(tmp_path / "machine-b"))
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.slow
@pytest.mark.parametrize("trust", [[], ["--shared-cache-trust", "any"]])
def test_forged_reference_outputs_are_refused(
        built: tuple[Path, Path, dict[str, dict[str, Any]]], tmp_path: Path,
        trust: list[str]) -> None:
    recipe, team, first = built
    reference = next(s for s in first.values() if s["op"] == "reference")
    folder = entry(team, reference["key"])
    files = {p.name: p for p in folder.iterdir() if p.name != "artifact.json"}
    forged = {name: path.read_bytes()[::-1] for name, path in files.items()}
    poison(folder, unsigned, forged)
    second, stderr = run(recipe, tmp_path / "b", tmp_path / "machine-b",
                         "--shared-cache", str(team), *trust)
    assert second[reference["id"]]["outcome"] == "built"
    assert second[reference["id"]]["artifact_digest"] == reference["artifact_digest"]
    assert "refusing entry" in stderr
    if trust:  # everything else unsigned is taken under `any`
        assert second["onnx-optimize"]["outcome"] == "cached"


@pytest.mark.slow
def test_a_cut_manifest_is_refused_and_replaced(
        built: tuple[Path, Path, dict[str, dict[str, Any]]], tmp_path: Path) -> None:
    recipe, team, first = built
    manifest = entry(team, first["onnx-optimize"]["key"]) / "artifact.json"
    manifest.write_bytes(manifest.read_bytes()[:100])  # an upload killed mid-write
    second, stderr = run(recipe, tmp_path / "b", tmp_path / "machine-b",
                         "--shared-cache", str(team))
    assert second["onnx-optimize"]["outcome"] == "built"
    assert "does not parse" in stderr
    json.loads(manifest.read_text())  # B's upload replaced it
    third, _ = run(recipe, tmp_path / "c", tmp_path / "machine-c", "--shared-cache", str(team))
    assert third["onnx-optimize"]["outcome"] == "cached"


@pytest.mark.slow
def test_an_unreachable_store_with_a_password_warns_once_and_builds(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    recipe = tiny_project()
    cache = tmp_path / "cache-a"
    run(recipe, tmp_path / "a", cache)
    url = "ftp://builder:hunter2@127.0.0.1:9/team-cache"  # port 9 (discard): refused
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "b"), "--cache-dir",
                       str(cache), "--shared-cache", url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.count("unreachable") == 1
    assert "ftp://builder:***@127.0.0.1:9" in result.stderr
    everything = result.stdout + result.stderr + "".join(
        p.read_text(errors="replace") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert "hunter2" not in everything


@pytest.mark.slow
def test_cache_verify_checks_signatures(
        built: tuple[Path, Path, dict[str, dict[str, Any]]], tmp_path: Path) -> None:
    recipe, team, first = built
    machine_b = tmp_path / "machine-b"
    run(recipe, tmp_path / "b", machine_b, "--shared-cache", str(team))
    key = first["onnx-optimize"]["key"]
    local = entry(machine_b, key) / "artifact.json"
    manifest = json.loads(local.read_text())
    assert manifest["origin"]["trust"] == "key" and "signature" in manifest
    manifest["metadata"]["seconds"] = 0.0  # a figure changed after signing
    local.write_text(json.dumps(manifest))
    verify = edgebuild("cache", "verify", "--cache-dir", str(machine_b))
    assert verify.returncode == 3, verify.stdout + verify.stderr
    assert f"corrupt {key}: from shared store" in verify.stdout
    assert "signature does not verify" in verify.stdout


@pytest.mark.slow
def test_another_writers_key_is_trusted_through_a_key_file(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    recipe = tiny_project()
    team = str(tmp_path / "team-cache")
    keys = {}
    for name in ("a", "b"):
        made = edgebuild("cache", "keygen", "--shared-cache-key", str(tmp_path / name / "k.pem"))
        assert made.returncode == 0, made.stdout + made.stderr
        keys[name] = tmp_path / name / "k.pem"
    first, _ = run(recipe, tmp_path / "a", tmp_path / "machine-a", "--shared-cache", team,
                   "--shared-cache-key", str(keys["a"]))
    untrusting, stderr = run(recipe, tmp_path / "b", tmp_path / "machine-b", "--shared-cache",
                             team, "--shared-cache-key", str(keys["b"]))
    assert untrusting["onnx-optimize"]["outcome"] == "built"
    assert stderr.count("refusing entry") == 1 and "is not a trusted key" in stderr
    second, _ = run(recipe, tmp_path / "c", tmp_path / "machine-c", "--shared-cache", team,
                    "--shared-cache-key", str(keys["b"]), "--shared-cache-trust",
                    str(tmp_path / "a" / "k.pub"))
    assert second["onnx-optimize"]["outcome"] == "cached"
    assert second["onnx-optimize"]["artifact_digest"] == first["onnx-optimize"][
        "artifact_digest"]
