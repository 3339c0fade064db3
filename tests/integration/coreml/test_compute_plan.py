"""Core ML's compute plan as an OpProfile (backends/coreml/plan.py): per op the device
Core ML prefers and its estimated cost share, never a time. The conversion is checked on
coremltools' own classes (their macOS-only proxies aside: see ConstructedProxy); the real
plan of a converted model on a Mac."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgebuild.measure.record import OpProfile
from edgebuild.report.html import html_page
from edgebuild.report.model import Report, TargetReport
from edgebuild.report.opcompare import measured
from edgebuild.report.render import markdown

pytestmark = pytest.mark.coreml

EVIL = "<script>alert(1)</script>|`x`](http://e)"


def _report(target: TargetReport) -> Report:
    return Report(recipe="r", recipe_file="r.yaml", edgebuild_version="0", started="now",
                  seconds=1.0, exit_code=0, stages=[], targets=[target], counts={})


def _device(name: str) -> Any:
    """An instance of coremltools' own device class. Its constructor takes only the
    macOS framework's proxy, which Linux has not; the conversion reads only the class."""
    from coremltools.models import compute_device

    cls = getattr(compute_device, name)
    return cls.__new__(cls)


def _op(kind: str, output: str, blocks: list[Any] | None = None) -> Any:
    from coremltools.models import compute_plan as cp

    return cp.MLModelStructureProgramOperation(
        inputs={}, operator_name=kind, blocks=blocks or [], __proxy__=None,
        outputs=[cp.MLModelStructureProgramNamedValueType(
            name=output, type=cp.MLModelStructureProgramValueType())])


class ConstructedProxy:
    """Stands in for the macOS-only `_MLComputePlanProxy` behind coremltools'
    MLComputePlan (whose methods are the real ones, delegating to it): the structure, and
    per operation a usage and a cost of coremltools' own classes. The values are made up
    here, not recorded on a Mac: this checks the conversion, not Core ML."""

    def __init__(self, structure: Any, usage: dict[str, Any], cost: dict[str, Any]) -> None:
        self.model_structure = structure
        self._usage, self._cost = usage, cost

    def get_compute_device_usage_for_mlprogram_operation(self, op: Any) -> Any:
        return self._usage.get(op.outputs[0].name)

    def get_estimated_cost_for_mlprogram_operation(self, op: Any) -> Any:
        return self._cost.get(op.outputs[0].name)


def _plan() -> Any:
    from coremltools.models import compute_plan as cp

    inner = cp.MLModelStructureProgramBlock(inputs=[], operations=[_op("relu", "loop_relu")],
                                            output_names=["loop_relu"])
    ops = [_op("const", "conv_0_weight"), _op("conv", EVIL), _op("relu", "relu_1"),
           _op("while_loop", "loop", [inner]), _op("softmax", "probs")]
    block = cp.MLModelStructureProgramBlock(inputs=[], operations=ops,
                                            output_names=["probs"])
    main = cp.MLModelStructureProgramFunction(inputs=[], block=block)
    structure = cp.MLModelStructure(neuralnetwork=None, pipeline=None,
                                    program=cp.MLModelStructureProgram(functions={"main": main}))
    cpu, gpu, ane = (_device(n) for n in ("MLCPUComputeDevice", "MLGPUComputeDevice",
                                          "MLNeuralEngineComputeDevice"))
    usage = {EVIL: cp.MLComputePlanDeviceUsage(ane, [cpu, gpu, ane]),
             "relu_1": cp.MLComputePlanDeviceUsage(ane, [cpu, gpu, ane]),
             "loop_relu": cp.MLComputePlanDeviceUsage(cpu, [cpu]),
             "probs": cp.MLComputePlanDeviceUsage(gpu, [cpu, gpu])}
    cost = {EVIL: cp.MLComputePlanCost(0.7), "relu_1": cp.MLComputePlanCost(0.1),
            "loop_relu": cp.MLComputePlanCost(0.05), "probs": cp.MLComputePlanCost(0.15)}
    plan = cp.MLComputePlan.__new__(cp.MLComputePlan)  # its __init__ wants the proxy
    plan.__proxy__ = ConstructedProxy(structure, usage, cost)
    return plan


def test_compute_plan_rows_are_devices_and_cost_shares_not_times() -> None:
    from edgebuild.backends.coreml.plan import from_plan

    profile = from_plan(_plan())
    assert profile.estimate and profile.ops_ms is None and profile.runs is None
    assert [row.node for row in profile.rows] == [EVIL, "probs", "relu_1", "loop_relu", "loop"]
    rows = {row.node: row for row in profile.rows}
    assert "conv_0_weight" not in rows  # a const runs nowhere
    assert rows[EVIL].exec == "NeuralEngine (CPU, GPU, NeuralEngine)"
    assert rows["probs"].exec == "GPU (CPU, GPU)" and rows["loop_relu"].exec == "CPU (CPU)"
    assert rows["loop"].exec == "unknown" and rows["loop"].share == 0.0  # no usage, no cost
    assert all(row.ms is None and row.onnx_nodes is None for row in profile.rows)
    assert rows[EVIL].share == pytest.approx(0.7)
    assert profile.by_type()["relu"] == pytest.approx(0.15)
    assert not measured(profile)  # never compared with a timed profile
    stored = OpProfile.model_validate(profile.to_json())  # the record round-trips
    assert stored.rows[0].ms is None and stored.estimate
    report = _report(TargetReport(name="iphone", profile="iphone", backend="coreml",
                                  op_profile=profile))
    page, text = html_page(report), markdown(report)
    assert "<script>" not in page and "<script>" not in text
    assert "estimated cost shares, not times" in text and "| `conv` | — | 70% |" in text


@pytest.mark.needs_macos
def test_the_plan_of_a_converted_model_on_a_mac(tmp_path: Path) -> None:
    import coremltools as ct
    import torch

    from edgebuild.backends.coreml.plan import compute_plan

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()).eval()
    traced = torch.jit.trace(model, torch.zeros(1, 3, 16, 16))
    package = tmp_path / "m.mlpackage"
    ct.convert(traced, inputs=[ct.TensorType(name="x", shape=(1, 3, 16, 16))],
               convert_to="mlprogram").save(str(package))
    profile = compute_plan(package, "all")
    assert profile.unmeasurable is None and profile.rows and profile.estimate
    assert {row.exec.split(" ")[0] for row in profile.rows if row.exec} <= {
        "CPU", "GPU", "NeuralEngine", "unknown"}
    # Each weight is the op's share of the whole model's work (0..1); consts left out.
    assert 0 < sum(row.share for row in profile.rows) <= 1 + 1e-6
