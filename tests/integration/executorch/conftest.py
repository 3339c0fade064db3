"""The ExecuTorch tests need the `executorch` package (`pip install 'edgebuild[executorch]'`,
not in scripts/setup.sh); everything else they use (torch, Fashion-MNIST) is the core's."""

from __future__ import annotations

import importlib.util

import pytest

MISSING = importlib.util.find_spec("executorch") is None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = pytest.mark.skip(reason="ExecuTorch tests need the executorch package: pip "
                               "install 'edgebuild[executorch]' (not installed by "
                               "scripts/setup.sh)")
    for item in items:
        if MISSING and "integration/executorch" in str(item.fspath):
            item.add_marker(missing)
