"""Core ML's compute plan as an OpProfile: per op, the device Core ML prefers and its
estimated share of the work (macOS 14.4+, coremltools >= 8).

    model.mlpackage ─ MLModel(...).get_compiled_model_path() ─▶ .mlmodelc
        ─ MLComputePlan.load_from_path(.mlmodelc, compute_units) ─▶ plan
          plan.model_structure.program.functions["main"].block.operations (nested blocks)
            ├─ get_compute_device_usage_for_mlprogram_operation(op) ─▶ preferred device
            │    (MLCPUComputeDevice | MLGPUComputeDevice | MLNeuralEngineComputeDevice)
            └─ get_estimated_cost_for_mlprogram_operation(op) ─▶ MLComputePlanCost.weight
                 (the op's share of the model's whole workload, 0..1), or None

It is a plan, not a run: the cost is Core ML's estimate of the op's share, not a time.
So the rows have no `ms`, `share` is the estimate, and the profile says `estimate`:
the report shows shares, never milliseconds, and compares it with no timed profile. On
Linux there is no Core ML framework to ask (coremltools' native proxy is macOS-only):
"not measurable here". A MIL operation has no name of its own: a row is named by its
first output (the variable it defines); the program was converted from PyTorch, so no
row names an ONNX node. Names come from the model file: plain strings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgebuild.measure.record import OpProfile, OpRow

SOURCE = "Core ML compute plan (MLComputePlan): estimated cost, not time"
NOTE = ("Core ML's plan, not a measurement: share is the op's estimated share of the "
        "model's work (MLComputePlanCost.weight), exec the device Core ML prefers for it "
        "(the devices that support it in brackets); converted from PyTorch, so no row "
        "names an ONNX node")
UNMEASURABLE = "not measurable here: Core ML's compute plan needs macOS"
_DEVICES = (("MLNeuralEngineComputeDevice", "NeuralEngine"), ("MLGPUComputeDevice", "GPU"),
            ("MLCPUComputeDevice", "CPU"))
_LOAD_TIME = ("const", "constexpr_")  # they hold or decompress weights: no compute


def device_name(device: Any) -> str:
    """CPU, GPU or NeuralEngine for one of coremltools' MLComputeDevice classes."""
    from coremltools.models import compute_device

    for cls, name in _DEVICES:
        if isinstance(device, getattr(compute_device, cls)):
            return name
    return type(device).__name__


def operations(block: Any) -> list[Any]:
    """The block's operations, each nested block's (loops, conditionals) after its op."""
    found = []
    for op in block.operations:
        found.append(op)
        for inner in op.blocks:
            found += operations(inner)
    return found


def from_plan(plan: Any, function: str = "main") -> OpProfile:
    """The plan's ops with their preferred device and estimated cost share, largest
    first; load-time ops (const, constexpr_*) left out."""
    program = plan.model_structure.program
    if program is None:
        return OpProfile(source=SOURCE, estimate=True, unmeasurable=(
            "not measured: the compute plan is read for ML programs only (this is a "
            "neural network model)"))
    rows = []
    for op in operations(program.functions[function].block):
        if op.operator_name.startswith(_LOAD_TIME):
            continue
        usage = plan.get_compute_device_usage_for_mlprogram_operation(op)
        cost = plan.get_estimated_cost_for_mlprogram_operation(op)
        if usage is None:
            where = "unknown"
        else:
            supported = ", ".join(device_name(d) for d in usage.supported_compute_devices)
            where = f"{device_name(usage.preferred_compute_device)} ({supported})"
        name = op.outputs[0].name if op.outputs else op.operator_name
        rows.append(OpRow(node=str(name), op_type=str(op.operator_name), exec=where, ms=None,
                          share=max(0.0, float(cost.weight)) if cost is not None else 0.0))
    rows.sort(key=lambda row: -row.share)
    return OpProfile(source=SOURCE, estimate=True, rows=rows, note=NOTE)


def compute_plan(package: Path, compute_units: str) -> OpProfile:
    """The compute plan of a saved .mlpackage on this Mac (`compute_units`: the target
    option, e.g. "all", "cpu_and_ne")."""
    import platform

    if platform.system() != "Darwin":
        return OpProfile(source=SOURCE, estimate=True, unmeasurable=UNMEASURABLE)
    from edgebuild.backends.coreml.convert import quiet_coremltools

    with quiet_coremltools() as ct:
        from coremltools.models.compute_plan import MLComputePlan

        units = getattr(ct.ComputeUnit, compute_units.upper())
        # The compiled path lives as long as the MLModel: keep it until the plan is read.
        model = ct.models.MLModel(str(package), compute_units=units)
        plan = MLComputePlan.load_from_path(model.get_compiled_model_path(), units)
        found = from_plan(plan)
        del model
        return found
