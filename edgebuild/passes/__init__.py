"""Passes: one per file. The table of names is `edgebuild.registry.PASSES`."""
