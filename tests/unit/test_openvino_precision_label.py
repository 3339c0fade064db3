"""The OpenVINO precision label: what the report says ran, from what the plugin read back.
Pure string logic (edgebuild/backends/openvino/ir.py imports no openvino at module level);
tests/integration/openvino/test_precision.py reads the facts from a real compiled model on
the CPU it runs on. The three CPUs this project has run on are faked here, each as its
plugin answers (capabilities, default precision, what a hint runs as), so every branch of
the label is checked whatever CPU runs the suite."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from edgebuild.backends.openvino import ir
from edgebuild.backends.openvino.backend import OpenVinoBackend
from edgebuild.backends.openvino.ir import precision_label
from edgebuild.backends.openvino.options import OpenVinoOptions
from edgebuild.backends.openvino.runner import OpenVinoRunner

AVX2 = ["FP32", "INT8", "BIN"]  # OPTIMIZATION_CAPABILITIES of the AVX2-only AMD EPYC
AMX = ["BF16", "WINOGRAD", "FP32", "FP16", "INT8", "BIN"]  # Xeon Sapphire Rapids


@dataclass(frozen=True)
class Cpu:
    """A CPU as OpenVINO's CPU plugin answers on it."""

    key: str  # the test id
    name: str
    capabilities: tuple[str, ...]  # OPTIMIZATION_CAPABILITIES, as the plugin lists them
    default: str  # ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT") with no hint

    def runs_as(self, requested: str) -> str:
        """The plugin's rule (intel_cpu Config): a hint the hardware supports is applied,
        any other leaves the default in place; no hint is the default."""
        native = {"f32": "FP32", "bf16": "BF16", "f16": "FP16"}.get(requested)
        return requested if native in self.capabilities else self.default

    def layers(self, effective: str) -> dict[str, int]:
        """The Fashion-MNIST CNN's 18 executed layers: in a narrower float, half of them
        (the convolutions and matmuls) run narrow and the rest stay f32 (as on the BF16
        EPYC: "layers: bf16 9, f32 9")."""
        return {"f32": 18} if effective == "f32" else {effective: 9, "f32": 9}


AVX2_EPYC = Cpu("avx2", "AVX2-only AMD EPYC", (*AVX2, "EXPORT_IMPORT"), "f32")
BF16_EPYC = Cpu("avx512-bf16", "AMD EPYC with AVX-512 VNNI + BF16",
                ("BF16", "WINOGRAD", "FP32", "INT8", "BIN", "EXPORT_IMPORT"), "bf16")
AMX_XEON = Cpu("amx", "Xeon Sapphire Rapids (AMX, avx512_fp16)", (*AMX, "EXPORT_IMPORT"), "bf16")

# (cpu, requested) -> (label, honoured): each branch of precision_label on each CPU.
EXPECTED = {
    (AVX2_EPYC, "f32"): ("f32", True),
    (AVX2_EPYC, "bf16"): ("bf16 requested; this CPU has no native bf16 (OpenVINO CPU "
                          "capabilities: FP32, INT8, BIN): ran as f32 (layers: f32 18)", False),
    (AVX2_EPYC, "f16"): ("f16 requested; this CPU has no native f16 (OpenVINO CPU "
                         "capabilities: FP32, INT8, BIN): ran as f32 (layers: f32 18)", False),
    (AVX2_EPYC, "default"): ("OpenVINO's default (no precision hint): ran as f32 on this CPU "
                             "(layers: f32 18)", True),
    (BF16_EPYC, "f32"): ("f32", True),
    (BF16_EPYC, "bf16"): ("bf16 (layers: bf16 9, f32 9)", True),
    # As seen on that CPU (issue 38): the fallback is the plugin's default, not f32.
    (BF16_EPYC, "f16"): ("f16 requested; this CPU has no native f16 (OpenVINO CPU "
                         "capabilities: BF16, WINOGRAD, FP32, INT8, BIN): ran as bf16 "
                         "(layers: bf16 9, f32 9)", False),
    (BF16_EPYC, "default"): ("OpenVINO's default (no precision hint): ran as bf16 on this "
                             "CPU (layers: bf16 9, f32 9)", True),
    (AMX_XEON, "f32"): ("f32", True),
    (AMX_XEON, "bf16"): ("bf16 (layers: bf16 9, f32 9)", True),
    (AMX_XEON, "f16"): ("f16 (layers: f16 9, f32 9)", True),
    (AMX_XEON, "default"): ("OpenVINO's default (no precision hint): ran as bf16 on this "
                            "CPU (layers: bf16 9, f32 9)", True),
}
CASES = pytest.mark.parametrize(("cpu", "requested"), list(EXPECTED),
                                ids=[f"{c.key}-{r}" for c, r in EXPECTED])


class _Str:
    """An openvino Type / OVAny: what ir.py turns into text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def get_type_name(self) -> str:
        return self.text

    def astype(self, _: type) -> str:
        return self.text


class _Op:
    def __init__(self, layer_type: str, precision: str) -> None:
        self.info = {"layerType": _Str(layer_type), "runtimePrecision": _Str(precision)}

    def get_rt_info(self) -> dict[str, _Str]:
        return self.info


class FakeCompiled:
    """A compiled model as the CPU plugin of `cpu` returns it for `config`."""

    def __init__(self, cpu: Cpu, config: dict[str, Any]) -> None:
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []
        self.effective = cpu.runs_as(str(config.get("INFERENCE_PRECISION_HINT", "default")))
        self.ops = [_Op("Input", "f32"), _Op("Const", "f32"), _Op("Output", "f32")] + [
            _Op("Convolution", p) for p, n in cpu.layers(self.effective).items()
            for _ in range(n)]

    def get_property(self, name: str) -> _Str:
        assert name == "INFERENCE_PRECISION_HINT"
        return _Str(self.effective)

    def get_runtime_model(self) -> FakeCompiled:
        return self

    def get_ordered_ops(self) -> list[_Op]:
        return self.ops

    def create_infer_request(self) -> object:
        return object()


class FakeModel:
    def __init__(self) -> None:
        self.outputs: list[Any] = []


class FakeCore:
    """ov.Core() on `cpu`: the capability reading the label depends on, faked."""

    def __init__(self, cpu: Cpu) -> None:
        self.cpu = cpu
        self.available_devices = ["CPU"]

    def get_property(self, device: str, name: str) -> Any:
        assert device == "CPU"
        return {"OPTIMIZATION_CAPABILITIES": list(self.cpu.capabilities),
                "INFERENCE_PRECISION_HINT": _Str(self.cpu.default),
                "FULL_DEVICE_NAME": self.cpu.name}[name]

    def read_model(self, _: str) -> FakeModel:
        return FakeModel()

    def compile_model(self, _: FakeModel, device: str, config: dict[str, Any]
                      ) -> FakeCompiled:
        assert device == "CPU"
        return FakeCompiled(self.cpu, config)


class FakeOpenVino:
    def __init__(self, cpu: Cpu) -> None:
        self.cpu = cpu

    def Core(self) -> FakeCore:  # noqa: N802 (openvino's spelling)
        return FakeCore(self.cpu)


def options(requested: str) -> OpenVinoOptions:
    return OpenVinoOptions.model_validate({"inference_precision": requested})


def test_an_honoured_f32_is_just_f32() -> None:
    assert precision_label("f32", "f32", {"f32": 14}, AVX2) == ("f32", True)


def test_a_hint_the_cpu_cannot_honour_says_why_and_what_ran() -> None:
    label, honoured = precision_label("bf16", "f32", {"f32": 14}, AVX2)
    assert label == ("bf16 requested; this CPU has no native bf16 (OpenVINO CPU "
                     "capabilities: FP32, INT8, BIN): ran as f32 (layers: f32 14)")
    assert not honoured
    label, _ = precision_label("f16", "f32", {"f32": 3}, AVX2)
    assert label.startswith("f16 requested; this CPU has no native f16 (")


def test_no_native_claim_without_the_capabilities_to_show_it() -> None:
    label, honoured = precision_label("f16", "f32", {"f32": 3}, AMX)
    assert label == "f16 requested; OpenVINO did not apply it: ran as f32 (layers: f32 3)"
    assert not honoured
    assert "no native" not in precision_label("bf16", "f32", {"f32": 3}, [])[0]


def test_a_native_bf16_lists_layers_left_in_another_precision() -> None:
    assert precision_label("bf16", "bf16", {"bf16": 90, "f32": 13}, AMX) == (
        "bf16 (layers: bf16 90, f32 13)", True)
    assert precision_label("bf16", "bf16", {"bf16": 90}, AMX) == ("bf16", True)


def test_int8_layers_of_a_quantized_model_show() -> None:
    assert precision_label("f32", "f32", {"f32": 4, "u8": 10}, AVX2) == (
        "f32 (layers: f32 4, u8 10)", True)


def test_the_device_default_says_what_it_picked_here() -> None:
    assert precision_label("default", "bf16", {"bf16": 5}, AMX) == (
        "OpenVINO's default (no precision hint): ran as bf16 on this CPU (layers: bf16 5)",
        True)
    assert precision_label("default", "f32", {}, AVX2, "GPU")[0] == (
        "OpenVINO's default (no precision hint): ran as f32 on this GPU")


@CASES
def test_precision_facts_on_each_cpu(cpu: Cpu, requested: str) -> None:
    """What the compile stage and the runner read back, from the plugin of each CPU: the
    hint it kept (not an assumed f32), the executed layers, the capabilities without
    EXPORT_IMPORT, and the label."""
    core = FakeCore(cpu)
    config = {} if requested == "default" else {"INFERENCE_PRECISION_HINT": requested}
    facts = ir.precision_facts(core, core.compile_model(FakeModel(), "CPU", config), "CPU",
                               requested)
    label, honoured = EXPECTED[cpu, requested]
    assert (facts["label"], facts["honoured"]) == (label, honoured)
    assert facts["effective_inference_precision"] == cpu.runs_as(requested)
    assert facts["runtime_precisions"] == cpu.layers(cpu.runs_as(requested))
    assert facts["device_capabilities"] == [c for c in cpu.capabilities
                                            if c != "EXPORT_IMPORT"]
    assert facts["requested_inference_precision"] == requested


@CASES
def test_the_runner_flags_every_figure_that_did_not_run_as_asked(
        cpu: Cpu, requested: str) -> None:
    """The runner's `fallback` (carried by every accuracy and latency figure) is set when
    the hint was not honoured or left to OpenVINO, and never for an honoured one."""
    runner = OpenVinoRunner(Path("model.xml"), "CPU",
                            {} if requested == "default"
                            else {"INFERENCE_PRECISION_HINT": requested})
    runner._load(FakeCore(cpu), FakeModel())
    label, honoured = EXPECTED[cpu, requested]
    assert runner.precision == label
    if honoured and requested != "default":
        assert runner.fallback is None
    else:
        assert runner.fallback == f"precision {label}"


@CASES
def test_the_compile_stage_keys_twins_by_what_ran_on_each_cpu(
        cpu: Cpu, requested: str) -> None:
    """The compile stage's reading on the build host: its label, and the options that took
    effect (a search's twin check, run/search.distinct): a bf16 hint is a twin of f32 only
    where it ran as f32 (AVX2), an f16 hint a twin of bf16 where it ran as bf16 (the
    AVX-512 BF16 EPYC)."""
    facts = OpenVinoBackend()._on_this_host(FakeOpenVino(cpu), Path("model.xml"),
                                            options(requested))
    assert facts["checked_on_this_host"] is True
    assert facts["host_device"] == cpu.name
    assert (facts["label"], facts["honoured"]) == EXPECTED[cpu, requested]
    assert facts["effective_inference_precision"] == cpu.runs_as(requested)


def test_which_hints_are_twins_on_each_cpu() -> None:
    """The CPUs differ in which hints run alike: the table a search relies on."""
    def ran(cpu: Cpu) -> dict[str, str]:
        return {r: OpenVinoBackend()._on_this_host(FakeOpenVino(cpu), Path("model.xml"),
                                                   options(r))["effective_inference_precision"]
                for r in ("f32", "bf16", "f16", "default")}

    assert ran(AVX2_EPYC) == {"f32": "f32", "bf16": "f32", "f16": "f32", "default": "f32"}
    assert ran(BF16_EPYC) == {"f32": "f32", "bf16": "bf16", "f16": "bf16", "default": "bf16"}
    assert ran(AMX_XEON) == {"f32": "f32", "bf16": "bf16", "f16": "f16", "default": "bf16"}
