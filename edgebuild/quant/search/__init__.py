"""Searches over quantizations: per-layer sensitivity, accuracy-aware, the fidelity budget."""
