"""The emulated aarch64 board, provisioned once per machine (boards/provision.py): in the
per-machine boards folder (~/.cache/edgebuild-boards, or $EDGEBUILD_BOARDS_DIR), which a
fresh clone's CI run reuses. The first session on a machine pays ~20 s and ~350 MB; a
machine that cannot make it (no qemu-user, no network to the Debian mirror or PyPI)
skips these tests with the reason."""

from __future__ import annotations

import shutil

import pytest

from edgebuild.boards.provision import Board, setup_board
from edgebuild.errors import EdgebuildError


@pytest.fixture(scope="session")
def board() -> Board:
    if shutil.which("qemu-aarch64-static") is None:
        pytest.skip("needs qemu-user (apt-get install qemu-user-static; scripts/setup.sh)")
    try:
        made, _ = setup_board("aarch64")
    except EdgebuildError as exc:
        pytest.skip(f"the emulated aarch64 board cannot be provisioned here: {exc}")
    return made
