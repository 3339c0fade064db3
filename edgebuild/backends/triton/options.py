"""The Triton backend's options (a target profile's `options:`), and their enums.

Below everything else in backends/triton/: backend.py declares `Backend[TritonOptions]`,
and repository.py writes the model repository from them.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgebuild.recipe.datasets import ImagePreprocess


class ModelBackend(StrEnum):
    """Which Triton backend serves the model (config.pbtxt's `backend:`)."""

    ONNXRUNTIME = "onnxruntime"  # model.onnx, the recipe's ONNX as built


class InstanceKind(StrEnum):
    CPU = "KIND_CPU"
    GPU = "KIND_GPU"


class Postprocess(StrEnum):
    NONE = "none"
    # softmax over the model's first output's last axis, then the `top_k` best classes:
    # outputs `scores` (float32 probabilities) and `classes` (int64), best first.
    CLASSIFICATION = "classification"


class TritonOptions(BaseModel):
    """Options of the Triton backend (target profile `options:`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: ModelBackend = Field(
        ModelBackend.ONNXRUNTIME, description="The Triton backend the model's config.pbtxt "
        "names (`onnxruntime`: the recipe's ONNX as `1/model.onnx`).")
    max_batch_size: int | None = Field(
        None, ge=0, description="config.pbtxt's `max_batch_size`. Default: 8 when every "
        "input's axis 0 is a dynamic batch axis in the recipe (`dynamic_axes: {0: ...}`), "
        "else 0 (no batching: the shapes are served as declared).")
    dynamic_batching: bool = Field(
        True, description="Add `dynamic_batching` (needs max_batch_size > 0).")
    preferred_batch_sizes: list[int] = Field(
        [], description="dynamic_batching's `preferred_batch_size`, each 1..max_batch_size.")
    max_queue_delay_microseconds: int = Field(
        0, ge=0, description="dynamic_batching's `max_queue_delay_microseconds`.")
    instance_count: int = Field(1, ge=1, description="instance_group's `count`.")
    instance_kind: InstanceKind = Field(
        InstanceKind.CPU, description="instance_group's `kind` (`KIND_GPU` for a GPU server; "
        "the server bundled here is CPU only).")
    preprocess: ImagePreprocess | None = Field(
        None, description="Adds a Python pre-processing model and an ensemble: decoded RGB "
        "(or, with `color: gray`, L) uint8 pixels (H, W, C) in; resize, letterbox, centre "
        "crop, channel order, normalization and layout exactly as the recipe's dataset "
        "`preprocess:` does (give it the same values, e.g. with a YAML anchor: the served "
        "model runs a copy of the loader's own code, edgebuild/data/pixels.py). With "
        "resize, letterbox or crop the ensemble takes photos of any size. The model must "
        "have one image input.")
    postprocess: Postprocess = Field(
        Postprocess.NONE, description="Adds a Python post-processing model to the ensemble: "
        "`classification` (softmax, then the top_k classes).")
    top_k: int = Field(5, ge=1, description="With `postprocess: classification`.")
    concurrency: list[int] = Field(
        [1, 2, 4], min_length=1, description="perf_analyzer's concurrency sweep; the "
        "latency figures (p50/p90/p99) are the first level's, throughput is every level's.")
    perf_image: list[int] = Field(
        [480, 640], min_length=2, max_length=2, description="`[height, width]` of the "
        "images perf_analyzer sends when the ensemble takes any size (random pixels: "
        "resizing costs the same for any content).")
    measurement_interval_ms: int = Field(
        2000, ge=100, description="perf_analyzer's `--measurement-interval` per window.")

    @model_validator(mode="after")
    def _consistent(self) -> TritonOptions:
        if self.preferred_batch_sizes and self.max_batch_size is not None and any(
                not 1 <= b <= self.max_batch_size for b in self.preferred_batch_sizes):
            raise ValueError("preferred_batch_sizes must lie in 1..max_batch_size")
        if self.postprocess is not Postprocess.NONE and self.preprocess is None:
            raise ValueError("postprocess needs `preprocess` too: the ensemble is "
                             "pre -> model -> post")
        return self

    @property
    def ensemble(self) -> bool:
        return self.preprocess is not None
