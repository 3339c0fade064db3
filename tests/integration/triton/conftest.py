"""The Triton tests serve a real model in the Triton 2.51.0 server bundled in
`nvidia-pytriton`, in a venv of its own (edgebuild/backends/triton/env.py). They make
that venv on first use (pip: 513 MB on disk, 53 s here; cached per machine) and skip,
saying why, when it cannot be made here."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from edgebuild.backends.triton.env import ServerEnv, find_env, make_env


@pytest.fixture(scope="session")
def server_env() -> ServerEnv:
    found = find_env()
    if isinstance(found, ServerEnv):
        return found
    log = Path(tempfile.mkdtemp(prefix="edgebuild-triton-env-")) / "pip.log"
    try:
        return make_env(log)
    except Exception as error:  # no network, no wheel for this Python: not here
        tail = log.read_text(errors="replace")[-400:] if log.is_file() else ""
        pytest.skip(f"the Triton server environment cannot be made here: {error} {tail}")
