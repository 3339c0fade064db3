"""The small typed parts of a backend's declaration: where its stages run, what it can do.

A `Backend` class (backends/base.py) declares them as class attributes; the planner
reads `placement` once, when it makes a target's stages, and writes the answer on each
stage (`Stage.runs_on`); the scheduler only reads that::

    Backend.placement ── planner ──▶ Stage.runs_on ── scheduler ──▶ Dask resource / SSH board

Below the planner and the scheduler, beside `base.py`; `Where` itself is core's
(core/where.py: the stage and the scheduler use it without importing a backend), and
is exported here with the rest of the declaration.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from edgebuild.core.where import Where

__all__ = ["Capabilities", "Placement", "Where"]


class Placement(BaseModel):
    """Where a backend's stages run, besides its measurements (latency, throughput and
    A/B timing are always the device's).

    A wrong value, or a field this model does not have, fails when the backend's class
    is defined, naming the field.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # DEVICE: compile must run on the target device itself (a compiler that builds for
    # the GPU it runs on); under a Dask cluster it is sent to the worker holding it.
    compile: Where = Where.HOST
    # Compile runs here, and a second stage (`device-build`, on the device) turns its
    # result into what the device runs (`Backend.build_on_device`: TensorRT's engine).
    # Latency times that build.
    device_build: bool = False
    # HOST: the accuracy stage (`infer`) runs the compiled artifact on this host (TensorRT:
    # the ONNX in ONNX Runtime), not on the device.
    accuracy: Where = Where.DEVICE


class Capabilities(BaseModel):
    """What a backend can measure or build, read by the loader and the measuring stages."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Its runner runs the runtime in this process (no device tool): measuring/footprint.py
    # reads the runtime's peak resident memory in a fresh process here. False: a memory
    # gate is "not measurable here" (an emulator's or a stand-in's memory is not the
    # device's). `Backend.memory_measurable` may narrow it per target.
    measures_memory: bool = False
    # Its `op_profile` answers where its latency cannot be measured (QNN: the HTP
    # emulator's profile, with no phone; Core ML: "the compute plan needs macOS"):
    # measure-latency takes that profile when asked and keeps the latency "not measurable
    # here" (measuring/latency.py), and `probe` leaves such a stage to run.
    profiles_without_latency: bool = False
    # Builds a model whose graph ends in NMS (`model.prepost.detection`) faithfully; a
    # backend that would freeze or drop it says so at validation instead.
    converts_nms: bool = True
