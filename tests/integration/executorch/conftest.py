"""The ExecuTorch tests need the `executorch` package (`pip install 'edgebuild[executorch]'`,
which scripts/setup.sh installs); everything else they use is the core's."""

from __future__ import annotations

import importlib.util

import pytest

MISSING = importlib.util.find_spec("executorch") is None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = pytest.mark.skip(reason="ExecuTorch tests need the executorch package: pip "
                               "install 'edgebuild[executorch]' (scripts/setup.sh does)")
    for item in items:
        if MISSING and "integration/executorch" in str(item.fspath):
            item.add_marker(missing)
