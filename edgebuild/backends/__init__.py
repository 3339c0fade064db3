"""Backends: one folder each (compiler + runner). The table is `edgebuild.registry`."""
