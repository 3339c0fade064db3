"""Shared fixtures: a real tiny ONNX model, recipe files, and an isolated cache."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def load_module(path: Path, name: str | None = None) -> Any:
    """A Python file (a test model, a recipe's model) as a fresh module, by path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
FASHION = Path("/usr/share/datasets/fashion-mnist")  # Debian dataset-fashion-mnist


def edgebuild(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "edgebuild", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=900)


def fashion_recipe(name: str, test_limit: int, calibration_limit: int = 100) -> str:
    """A recipe's head for the committed Fashion-MNIST CNN: model, inputs, the test and
    calibration datasets and the export passes; append `targets:`."""
    return f"""\
name: {name}
model:
  factory: {REPO}/recipes/models/fashion_mnist_cnn.py:build
  weights: {REPO}/recipes/models/fashion_mnist_cnn.pt
inputs:
  - {{name: image, shape: [1, 1, 28, 28], dtype: float32, dynamic_axes: {{0: batch}}}}
outputs: [logits]
datasets:
  test:
    kind: idx
    images: {FASHION}/t10k-images-idx3-ubyte.gz
    labels: {FASHION}/t10k-labels-idx1-ubyte.gz
    limit: {test_limit}
    preprocess: &normalize {{scale: 0.00392156862745098, mean: [0.2860], std: [0.3530]}}
  calibration:
    kind: idx
    images: {FASHION}/train-images-idx3-ubyte.gz
    limit: {calibration_limit}
    preprocess: *normalize
passes:
  - export-onnx: {{opset: 17}}
  - onnx-optimize
"""


QUICK_TIMING = {"warmup_iterations": 1, "min_iterations": 5, "min_seconds": 0,
                "max_busy_share": None}


def cheap_fashion_copy(tmp_path: Path, targets: tuple[str, ...] = ()) -> Path:
    """recipes/fashion-mnist.yaml in a project of its own, made cheap: 200 test images, 16
    for calibration, one finetune epoch on 128 images (the committed recipe's two epochs
    on 60,000 take 4 minutes on 2 cores), a few timing runs; `targets`: only those. Its
    targets, passes and gates are otherwise the committed ones."""
    import shutil

    import yaml

    recipe: dict[str, Any] = yaml.safe_load(
        (REPO / "recipes" / "fashion-mnist.yaml").read_text())
    if not Path(recipe["datasets"]["test"]["images"]).is_file():
        pytest.skip("needs the Debian package dataset-fashion-mnist (scripts/setup.sh)")
    project = tmp_path / "project"
    models = project / "models"
    models.mkdir(parents=True)
    for name in ("fashion_mnist_cnn.py", "fashion_mnist_cnn.pt", "train_fashion_mnist.py"):
        shutil.copy(REPO / "recipes" / "models" / name, models / name)
    recipe["datasets"]["test"]["limit"] = 200
    recipe["datasets"]["test-1k"]["limit"] = 20
    recipe["datasets"]["calibration"]["limit"] = 16
    if targets:
        recipe["targets"] = {n: t for n, t in recipe["targets"].items() if n in targets}
    for target in recipe["targets"].values():
        for step in target.get("passes", []):
            if isinstance(step, dict) and "prune" in step:
                step["prune"]["finetune_kwargs"] = {"epochs": 1, "samples": 128}
        target["measure"] = QUICK_TIMING
    path = project / "fashion-mnist.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def busy_reason(out: Path) -> str | None:
    """Why the run reported at `out` cannot be judged as a whole on this machine now, or
    None: it failed only because its latency could not be timed cleanly (other processes
    took more than `measure.max_busy_share` of the CPU), or a latency budget was
    undecided because the machine was loaded (`on_noisy`).

    That verdict is edgebuild working as designed on a shared machine (a figure timed
    under load would gate the load, not the model); it is not a defect of the recipe.
    """
    import json

    report = json.loads((out / "report.json").read_text())
    failing = [g for t in report["targets"] for g in t["gates"] if g["counts_as_failure"]]
    if report["exit_code"] == 1 and failing and all(
            g["status"] == "unmeasurable" and "other processes used" in g["message"]
            for g in failing):
        return f"the machine was too busy to time: {failing[0]['message'][:160]}"
    # A budget missed under load with `on_noisy: undecided` passes the run but is not
    # cached, so a "fully cached" second run would time it again.
    noisy = [g for t in report["targets"] for g in t["gates"] if "noisy" in g["details"]]
    if noisy:
        return f"the machine was too loaded to judge a budget: {noisy[0]['message'][:160]}"
    return None


def skip_if_the_machine_was_busy(out: Path) -> None:
    """Skip, saying why (busy_reason), when only the machine's load decided the run."""
    reason = busy_reason(out)
    if reason is not None:
        pytest.skip(reason)


def retimed(out: Path) -> set[str]:
    """The stages of the run reported at `out` whose figure was timed while other
    processes took the CPU. Such a figure is never cached (issue 27), so the next run
    times exactly these again: by design on a busy machine, nothing on a quiet one.
    Read it before the next run overwrites the report."""
    import json

    stages = json.loads((out / "report.json").read_text())["stages"]
    return {s["id"] for s in stages if s["metadata"].get("untrusted")}


def cached_rerun(before: set[str]) -> str:
    """What a fully cached re-run prints, given `retimed()` of the run before it."""
    return "0 stages executed" if not before else \
        f"{len(before)} stage(s) executed ({len(before)} built)"


QUICKSTART = "recipes/quickstart.yaml"
FASHION_RECIPE = "recipes/fashion-mnist.yaml"
VOICE_ACTIVITY = "recipes/voice-activity.yaml"


@dataclass(frozen=True)
class SessionBuild:
    """One cold build of a committed recipe (minutes on 2 cores), shared by the session:
    `quickstart_build` (tests/e2e/test_recipes.py re-runs it cached,
    tests/integration/fleet publishes it, tests/integration/executorch reads its .pte,
    tests/integration/litert_torch its .tflite files) and
    `fashion_mnist_build` (the e2e check re-runs it cached, tests/e2e/test_ci_workflows.py
    starts its CI service's cache from it) and `voice_activity_build` (its e2e check
    re-runs it cached; the TFLite and QNN streaming checks read its android and
    snapdragon targets)."""

    out: Path
    cache: Path
    busy: frozenset[str]  # retimed() of the cold run: what a cached re-run times again
    # busy_reason() of the cold run: its verdict was the machine's load, not the recipe's.
    # Tests of the run as a whole skip with it (skip_if_busy); tests that read what it
    # built (artifacts, accuracy) do not: load changes no output.
    busy_verdict: str | None = None

    def skip_if_busy(self) -> None:
        if self.busy_verdict is not None:
            pytest.skip(self.busy_verdict)


def cold_build(tmp_path_factory: pytest.TempPathFactory, recipe: str, name: str) -> SessionBuild:
    """`recipe` built once, with its own cache (isolated_cache is per test). When only
    the machine's load decided its verdict, that is recorded (`busy_verdict`) for the
    tests that judge the run as a whole; a setup error is cached by pytest for the
    session, so it is not built again."""
    folder = tmp_path_factory.mktemp(name)
    out, cache = folder / "out", folder / "cache"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("EDGEBUILD_CACHE_DIR", str(cache))
        env.setenv("XDG_CONFIG_HOME", str(folder / "config"))
        if "EDGEBUILD_QUIET_WAIT_S" not in os.environ:
            env.setenv("EDGEBUILD_QUIET_WAIT_S", "3")
        cold = edgebuild("run", recipe, "--out", str(out), "--cache-dir", str(cache))
    verdict = busy_reason(out) if cold.returncode in (0, 1) else None
    assert cold.returncode == 0 or verdict is not None, cold.stdout + cold.stderr
    assert "Traceback" not in cold.stderr
    return SessionBuild(out=out, cache=cache, busy=frozenset(retimed(out)),
                        busy_verdict=verdict)


@pytest.fixture(scope="session")
def quickstart_build(tmp_path_factory: pytest.TempPathFactory) -> SessionBuild:
    """recipes/quickstart.yaml built once (cold_build)."""
    return cold_build(tmp_path_factory, QUICKSTART, "quickstart")


@pytest.fixture(scope="session")
def fashion_mnist_build(tmp_path_factory: pytest.TempPathFactory) -> SessionBuild:
    """recipes/fashion-mnist.yaml as committed (its real finetune, 10,000 test images)
    built once (cold_build)."""
    return cold_build(tmp_path_factory, FASHION_RECIPE, "fashion")


@pytest.fixture(scope="session")
def voice_activity_build(tmp_path_factory: pytest.TempPathFactory) -> SessionBuild:
    """recipes/voice-activity.yaml (Silero VAD from PyPI, five targets) built once
    (cold_build): its ONNX Runtime, TFLite and QNN tests read it."""
    if importlib.util.find_spec("silero_vad") is None:
        pytest.skip("needs silero-vad (scripts/setup.sh installs it --no-deps)")
    return cold_build(tmp_path_factory, VOICE_ACTIVITY, "voice-activity")


def pytest_configure(config: pytest.Config) -> None:
    """A busy test machine must not make a run wait its 90 s for quiet before timing
    (measure/quiet.py): 3 s, for every run the suite starts, the module- and
    session-scoped builds too (they are set up before isolated_cache; a module build
    without it waited 90 s per latency stage, 236 s where 58 s did). Tests of the wait
    itself set their own; a developer's own value is kept."""
    os.environ.setdefault("EDGEBUILD_QUIET_WAIT_S", "3")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own cache, so tests never see each other's artifacts."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("EDGEBUILD_CACHE_DIR", str(cache))
    # A busy test machine should not make every timing test wait the run's 90 s for
    # quiet (measure/quiet.py); tests of the wait itself set their own.
    if "EDGEBUILD_QUIET_WAIT_S" not in os.environ:
        monkeypatch.setenv("EDGEBUILD_QUIET_WAIT_S", "3")
    # The shared cache's default signing key lives in the config dir: never the user's.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return cache


def make_tiny_onnx(path: Path, scale: float = 2.0) -> Path:
    """A real 2-node ONNX classifier: logits = relu(x @ W * scale), 4 inputs -> 3 classes."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.0) * scale
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(weights, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


TINY_RECIPE = """\
name: tiny
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
datasets:
  samples: {kind: npz, path: samples.npz, labels: y}
passes:
  - onnx-optimize
targets:
  host-cpu:
    measure: {warmup_iterations: 1, min_iterations: 5, max_busy_share: null, min_seconds: 0}
    gates:
      accuracy: {dataset: samples, min_top1_agreement: 99}
      latency: {budget_ms: 1000}
      size: {max_mb: 1}
"""


@pytest.fixture
def tiny_project(tmp_path: Path) -> Callable[..., Path]:
    """Write a runnable recipe around the tiny ONNX model; returns the recipe path."""

    def write(recipe: str = TINY_RECIPE, name: str = "tiny.yaml") -> Path:
        import numpy as np

        project = tmp_path / "project"
        project.mkdir(exist_ok=True)
        make_tiny_onnx(project / "tiny.onnx")
        rng = np.random.default_rng(0)
        x = rng.standard_normal((16, 4)).astype(np.float32)
        np.savez(project / "samples.npz", x=x, y=rng.integers(0, 3, 16))
        path = project / name
        path.write_text(textwrap.dedent(recipe))
        return path

    return write


# -- Running in parallel (pytest-xdist, `make test`: -n 2) ------------------------------------

# Modules whose tests are each a long, independent build: spread test by test. Every other
# module's tests stay on one worker together, so a module's fixtures are built once.
SPREAD_MODULES = ("tests/e2e/test_recipes.py", "tests/e2e/test_search.py")
# The tests that read a session build (cold_build above), by fixture: one worker group each,
# so each is built once. pytest_collection_modifyitems refuses a user not listed here.
SESSION_BUILD_USERS: dict[str, tuple[str, ...]] = {
    "quickstart_build": ("tests/e2e/test_recipes.py::test_quickstart_recipe",
                         "tests/integration/fleet/test_quickstart_fleet.py",
                         *(f"tests/integration/executorch/test_backend.py::{name}" for name in (
                             "test_fp32_and_int8_pte_pass_their_gates_with_host_labels",
                             "test_delegation_table_lists_what_xnnpack_took",
                             "test_the_profile_names_xnnpacks_kernels_and_their_precision",
                             "test_the_pte_loads_and_runs_in_the_runtime")),
                         *(f"tests/integration/litert_torch/test_backend.py::{name}" for name in (
                             "test_float32_and_int8_pass_their_gates_in_litert",
                             "test_int8_keeps_the_float_layers_and_corrects_biases",
                             "test_the_tflite_loads_and_computes_what_pytorch_does"))),
    "fashion_mnist_build": ("tests/e2e/test_recipes.py::test_fashion_mnist_recipe",
                      "tests/e2e/test_ci_workflows.py"),
    "voice_activity_build": ("tests/e2e/test_recipes.py::test_voice_activity_recipe",
                             "tests/integration/tflite/test_voice_activity.py",
                             "tests/integration/qnn/test_lstm_decomposed.py"),
}


def xdist_group(nodeid: str) -> str:
    """The worker group of a test, from its node id alone (the scheduler sees no more):
    the session build it reads, the test itself in a SPREAD_MODULES module, else its
    module."""
    for fixture, users in SESSION_BUILD_USERS.items():
        if any(nodeid == user or nodeid.startswith(f"{user}::") for user in users):
            return fixture
    module = nodeid.split("::", 1)[0]
    return nodeid if module in SPREAD_MODULES else module


# pytest-timeout ([tool.pytest.ini_options] timeout: 15 min) for a test that may pay for a
# session build before its own work (the quickstart's: 8 min quiet, up to 15 under load).
SESSION_BUILD_TIMEOUT_S = 1800


def _uses_session_build(item: pytest.Item, fixture: str) -> bool:
    """Whether `item` reads this conftest's session build `fixture` (a module's own
    fixture of the same name shadows it and is not one)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.get(fixture, ()) if info is not None else ()
    return bool(defs) and getattr(defs[-1].func, "__module__", None) == __name__


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in SESSION_BUILD_USERS:
            if not _uses_session_build(item, fixture):
                continue
            if xdist_group(item.nodeid) != fixture:
                raise pytest.UsageError(f"{item.nodeid} uses {fixture}: add it to "
                                        "SESSION_BUILD_USERS in tests/conftest.py, so that "
                                        "the recipe is built once")
            item.add_marker(pytest.mark.timeout(SESSION_BUILD_TIMEOUT_S))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Workers get whole groups (xdist_group above). xdist's own `loadgroup` reads a
    marker into the node id, which pytest 9 no longer lets it rewrite, so the groups are
    computed from the node id here, in the scheduler that hands tests out."""
    from xdist.scheduler import LoadScopeScheduling

    # In collection order (tests/e2e first: the longest builds start first and the unit
    # tests fill the end), not xdist's default of the groups with the most tests first,
    # which starts the one-test quickstart and recipe groups last, two at once.
    config.option.loadscopereorder = False

    class Grouped(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return Grouped(config, log)
