"""The Backend and Runner interfaces.

Public methods check state and inputs, then call the `_`-prefixed methods a
backend implements (template method, as in Polygraphy's runners), so every
backend reports misuse the same way.
"""

from __future__ import annotations

import platform
from abc import ABC, abstractmethod
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, cast, get_args, get_origin

from pydantic import BaseModel
from typing_extensions import TypeVar  # `default=` (PEP 696) before Python 3.13

from edgebuild.backends.declaration import Capabilities, Placement
from edgebuild.core.datasets import dataset_names
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.errors import DataError, ShapeError

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.core.artifact import Artifact
    from edgebuild.measure.record import LatencyRecord, OpProfile
    from edgebuild.recipe.common import MeasureSettings

TensorMeta = dict[str, tuple[tuple[int | str, ...], str]]  # name -> (shape, dtype)
# What `Backend.probe` is asked about; "compile": whether this machine can compile at all.
PROBE_PURPOSES = ("latency", "accuracy", "build", "compile")
# The flags a backend class once set, and what declares each now.
_MOVED = {
    "compiles_on_device": "placement = Placement(compile=Where.DEVICE)",
    "builds_on_device": "placement = Placement(device_build=True)",
    "accuracy_on_host": "placement = Placement(accuracy=Where.HOST)",
    "measures_memory": "capabilities = Capabilities(measures_memory=True)",
    "profiles_without_latency": "capabilities = Capabilities(profiles_without_latency=True)",
    "converts_nms": "capabilities = Capabilities(converts_nms=False)",
}

# A backend's options model, `Backend[TfliteOptions]`; a bare `Backend` is any backend.
OptionsT = TypeVar("OptionsT", bound=BaseModel, covariant=True, default=BaseModel)


class Runner(ABC):
    """Loads a compiled artifact and runs inference; use as a context manager."""

    def __init__(self) -> None:
        self.is_active = False
        # Set by `activate` when the runner had to run the model another way than the
        # target asks (a delegate refused it): what ran instead and why, for the report.
        self.fallback: str | None = None

    def activate(self) -> None:
        if self.is_active:
            raise RuntimeError(f"{type(self).__name__} is already active")
        self._activate()
        self.is_active = True

    def deactivate(self) -> None:
        if self.is_active:
            self._deactivate()
            self.is_active = False

    def label(self, where: str) -> str:
        """`where` a figure comes from, with what ran instead if the runner fell back."""
        if not self.fallback:
            return where
        return f"{where}; {self.fallback}" if where else self.fallback

    def input_metadata(self) -> TensorMeta:
        self._require_active()
        return self._input_metadata()

    def reshape(self, shapes: dict[str, list[int]]) -> None:
        """Get ready for inputs of these shapes (a shape profile, edgebuild/core/shapes.py).

        Nothing to do when every input's dimensions are dynamic or already equal;
        otherwise the backend's `_reshape` resizes the model, or raises ShapeError
        naming the input it cannot resize.
        """
        from edgebuild.core.shapes import fits

        self._require_active()
        current = self._input_metadata()
        unknown = sorted(set(shapes) - set(current))
        if unknown:
            raise ShapeError(f"shape profile names inputs {unknown} the model does not have",
                             f"model inputs: {', '.join(current)}")
        wanted = {n: list(s) for n, s in shapes.items() if not fits(current[n][0], list(s))}
        if wanted:
            self._reshape(wanted)

    def _reshape(self, shapes: dict[str, list[int]]) -> None:
        """Resize the loaded model's inputs; the default says it cannot."""
        name, shape = next(iter(shapes.items()))
        fixed = list(self._input_metadata()[name][0])
        raise ShapeError(f"input '{name}' is fixed at {fixed} in this artifact and "
                         f"{type(self).__name__} cannot resize it to {shape}",
                         "keep the dimension dynamic in the artifact, or remove this size "
                         "from `shapes:`")

    def concurrent(self, feeds: dict[str, np.ndarray], streams: int | None, seconds: float,
                   warmup: float) -> dict[str, Any] | None:
        """Throughput the runtime's own way (OpenVINO: async requests under its THROUGHPUT
        hint), as measuring/throughput.drive reports it; None: measure-throughput runs
        `streams` runners of this backend, each in its own thread."""
        return None

    def fed(self, feeds: dict[str, np.ndarray],
            constants: set[str]) -> dict[str, np.ndarray]:
        """`feeds` without the declared-constant inputs (`constants`) this model does not
        have: timing a `fold-inputs` build beside one that still takes them, one set of
        feeds serves both."""
        have = self.input_metadata()
        return {k: v for k, v in feeds.items() if k in have or k not in constants}

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once. Checks that input names, ranks and dtypes match the model."""
        self._require_active()
        expected = self._input_metadata()
        missing = sorted(set(expected) - set(feeds))
        extra = sorted(set(feeds) - set(expected))
        if missing or extra:
            raise DataError(f"inputs do not match the model: missing {missing}, unexpected {extra}")
        for name, (shape, dtype) in expected.items():
            array = feeds[name]
            if str(array.dtype) != dtype:
                raise DataError(f"input '{name}' has dtype {array.dtype}, the model wants {dtype}")
            if len(array.shape) != len(shape) or any(
                isinstance(d, int) and d != a for d, a in zip(shape, array.shape, strict=True)
            ):
                raise DataError(f"input '{name}' has shape {list(array.shape)}, "
                                f"the model wants {list(shape)}")
        return self._infer(feeds)

    def _require_active(self) -> None:
        if not self.is_active:
            raise RuntimeError(f"{type(self).__name__} is not active; use it in a `with` block")

    def __enter__(self) -> Runner:
        self.activate()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.deactivate()

    @abstractmethod
    def _activate(self) -> None: ...

    @abstractmethod
    def _input_metadata(self) -> TensorMeta: ...

    @abstractmethod
    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def _deactivate(self) -> None:  # noqa: B027 - optional hook
        pass


class Backend(ABC, Generic[OptionsT]):
    """Compiles an artifact for a target and makes runners for the result.

    The class attributes are the backend's whole declaration: the registry, the
    planner, the cache keys and `run --baseline` read them, so adding a backend
    is one folder plus one entry point (docs/extending.md). Its options model is
    the class's parameter, `class TfliteBackend(Backend[TfliteOptions])`: that
    sets `Options` (what the recipe loader validates), and `options(target)` hands
    the target's options back as that model, typed.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    accepts: ClassVar[tuple[str, ...]]  # artifact formats compile takes ("pytorch" too)
    produces: ClassVar[str]  # format of the compiled artifact
    # The profile's `options:`: the class's parameter (`Backend[TfliteOptions]`) sets it.
    # Its DatasetRef fields are read (`datasets`).
    Options: ClassVar[type[BaseModel]]
    tools: ClassVar[tuple[str, ...]]  # distributions whose versions enter the cache key
    version: ClassVar[int] = 1  # in the key of every stage it compiles or runs; bump on change
    extra: ClassVar[str | None] = None  # pip extra that installs its tools
    install_hint: ClassVar[str] = ""  # when the extra alone cannot install them (vendor wheels)
    # Passes the planner may insert to reach `accepts` (each converts its `accepts[0]`
    # into its `produces`), e.g. TFLite contributes onnx -> tf-savedmodel.
    conversions: ClassVar[tuple[str, ...]] = ()
    # Compile-stage metadata keys its runner (or its device build) needs besides the
    # files: every build's manifest records them (artifacts/<target>/manifest.json), and
    # `run --baseline` hands exactly these to the baseline's runner.
    runner_metadata: ClassVar[tuple[str, ...]] = ()
    # What a device worker must have installed (`edgebuild worker --target` checks it
    # before joining); default: `tools`.
    device_tools: ClassVar[tuple[str, ...]] = ()
    implemented: ClassVar[bool] = True
    # Where compile, a device build and the accuracy stage run (backends/declaration.py);
    # the planner writes it on each stage (`Stage.runs_on`).
    placement: ClassVar[Placement] = Placement()
    # What it can measure or build: memory, a profile without latency, a graph with NMS.
    capabilities: ClassVar[Capabilities] = Capabilities()

    def memory_measurable(self, target: Target) -> bool:
        """Whether measuring/footprint.py reads `target`'s runtime memory on this host: the
        class's `capabilities.measures_memory`, unless a backend's targets differ (TFLite:
        on the host, not on a phone)."""
        return self.capabilities.measures_memory

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """`Options` from the class's parameter (`Backend[TfliteOptions]` declares it
        once); a flag that `placement` or `capabilities` now declares is refused: a
        backend written for the old flags would otherwise lose them without a word."""
        super().__init_subclass__(**kwargs)
        for old, new in _MOVED.items():
            if old in cls.__dict__:
                raise TypeError(f"backend {cls.__qualname__} sets `{old}`, which is now "
                                f"declared as `{new}` (edgebuild.backends.declaration)")
        for base in cls.__dict__.get("__orig_bases__", ()):
            (model,) = get_args(base) if get_origin(base) is Backend else (None,)
            if isinstance(model, type) and issubclass(model, BaseModel):
                cls.Options = model

    @classmethod
    def options(cls, target: Target) -> OptionsT:
        """The target's `options:` as this backend's model (the loader has checked them)."""
        # `Options` is the class's parameter (`__init_subclass__`): mypy cannot follow that.
        return cast(OptionsT, cls.Options.model_validate(target.options))

    def datasets(self, target: Target) -> tuple[str, ...]:
        """Recipe datasets compile reads: every DatasetRef in the target's options."""
        return dataset_names(self.options(target))

    @abstractmethod
    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        """Turn `ctx.input()` into this backend's native artifact under `ctx.out`.

        A backend that accepts `pytorch` and directly follows the model source has
        no input artifact and reads `ctx.model_source` instead; datasets named by
        its options (TFLite's calibration set) come from `ctx.dataset(name)`.
        """

    def build_on_device(self, ctx: StageContext, target: Target) -> OpResult:
        """With `placement.device_build`: turn the compiled `ctx.input()` into the device's
        artifact, on the device; elsewhere return a typed `unmeasurable` result."""
        raise NotImplementedError(f"backend {self.name} does not build on the device")

    @abstractmethod
    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        """A runner for a compiled artifact on the target's device."""

    def probe(self, target: Target, purpose: str) -> str | None:
        """Why this machine cannot measure (`purpose` "latency" or "accuracy") or build on
        the device ("build") for `target`, when that is cheap to tell; None when only the
        stage itself can tell.

        The driver asks this before it starts a worker for a stage that asks the same
        (`Op.probes`): "not here" is never cached (a phone may have been plugged in since),
        so a cached re-run asks again every time, and should not pay a process and a
        vendor import for it. A reason returned here must be the one the stage would give
        (`unmeasurable_reason`, `build_on_device`); "cheap" means no vendor import and no
        device I/O beyond listing what is attached (`adb devices`).
        """
        if purpose not in PROBE_PURPOSES:
            raise ValueError(f"probe purpose {purpose!r}: one of {', '.join(PROBE_PURPOSES)}")
        if purpose == "compile":
            return self.compile_probe(target) or None
        if purpose == "latency" and self.capabilities.profiles_without_latency \
                and target.measure.profile:
            return None  # the stage runs: it takes the profile it can (measuring/latency.py)
        return self._probe(target, purpose) or None

    def compile_probe(self, target: Target) -> str:
        """'' when this machine can compile for `target` (every backend whose tools are
        pip extras: a missing one is the stage's error, with the extra); else "not
        buildable here: …", for a backend whose tools cannot be a default install
        (litert-torch). Asked by the driver before each compile; cheap (no import)."""
        return ""

    def _probe(self, target: Target, purpose: str) -> str | None:
        """A backend that keeps this base's `unmeasurable_reason` is answered by it (it is
        cheap); one that overrides it overrides this too, or stays "ask the stage"."""
        if purpose != "build" and type(self).unmeasurable_reason is Backend.unmeasurable_reason:
            return self.unmeasurable_reason(target, purpose)
        return None

    def unmeasurable_reason(self, target: Target, purpose: str = "latency") -> str:
        """'' when this machine can run the target's artifacts, else why not.

        `purpose` is "accuracy" or "latency": a backend may check accuracy on a
        host interpreter while latency needs the real device. Cheap reasons are also
        given by `probe`, in the driver.
        """
        if not target.runs_here:
            kind = target.runs_on.kind.value
            hint = " (run with --cluster and a worker holding it)" if kind == "dask" else ""
            return (f"not measurable here: target '{target.name}' runs on a {kind} "
                    f"device and no {kind} runner is configured{hint}")
        arch = target.profile.device.arch
        if arch != platform.machine():
            return f"not measurable here: needs {arch}, this machine is {platform.machine()}"
        return ""

    def where(self, target: Target, purpose: str = "latency") -> str:
        """Where the figures for `purpose` come from, when it is not simply the target's
        own device (a host interpreter standing in for a phone, say); else ''."""
        return ""

    def device_latency(self, artifact: Artifact, target: Target,
                       settings: MeasureSettings) -> LatencyRecord | None:
        """Latency measured by a device's own tool (ms statistics), or None to time
        `runner().infer` in this process with the latency protocol. What the tool printed
        is read into the record (measure/record.py: read_record), so a tool output that
        does not fit is a clear stage error."""
        return None

    def op_profile(self, artifact: Artifact, target: Target, threads: int | None,
                   feeds: dict[str, np.ndarray], shapes: dict[str, list[int]],
                   runs: int) -> OpProfile | None:
        """A per-operator profile of `runs` inferences of `feeds` (after a warm-up), in a
        session of its own made for it (profiling perturbs timing: the latency stage calls
        this after its timed runs, only when the target asks for `measure.profile`);
        None when this backend has no profiler here (the record says so)."""
        return None
