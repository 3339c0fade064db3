"""The package order is a contract (pyproject.toml's [tool.importlinter], run by `make
lint`): a wrong import planted in a copy of the package breaks it, and says where."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.mark.skipif(not LINT_IMPORTS.is_file(),
                    reason="import-linter is not installed (the `dev` extra: make setup)")
@pytest.mark.parametrize("planted,contract", [
    # core is the ground floor: it imports no other package (the `core-alone` contract).
    ("edgebuild/core/digest.py", "core imports no other edgebuild package"),
    # The INT8 wing judges with fidelity, never with the gates above it (the layers).
    ("edgebuild/quant/prepared.py", "edgebuild's packages, in dependency order"),
    # devices (adb) is on the ground floor beside core: remote execution is execute/remote/.
    ("edgebuild/devices/adb.py", "edgebuild's packages, in dependency order"),
])
def test_a_planted_wrong_import_breaks_the_contract(tmp_path: Path, planted: str,
                                                    contract: str) -> None:
    shutil.copytree(REPO / "edgebuild", tmp_path / "edgebuild",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)

    def lint() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, text=True,
                              capture_output=True, env={"PYTHONPATH": str(tmp_path),
                                                        "PATH": "/usr/bin:/bin"}, check=False)

    clean = lint()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    with (tmp_path / planted).open("a") as source:
        source.write("\nfrom edgebuild.gates import result as _planted  # noqa\n")
    broken = lint()
    assert broken.returncode != 0
    assert any(line.startswith(contract) and " BROKEN" in line
               for line in broken.stdout.splitlines()), broken.stdout
    assert planted.removesuffix(".py").replace("/", ".") + " -> edgebuild.gates.result" in \
        broken.stdout
