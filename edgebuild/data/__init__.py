"""Datasets: loading, preprocessing and deterministic sampling."""

from edgebuild.data.loaders import Samples, dataset_digest, load_dataset

__all__ = ["Samples", "dataset_digest", "load_dataset"]
