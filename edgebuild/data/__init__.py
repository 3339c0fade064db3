"""Datasets: loading (`loaders`, needs numpy), digests (`digest`), sampling."""
