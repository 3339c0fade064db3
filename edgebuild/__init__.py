"""edgebuild: a compiler driver for edge ML models.

Importing this package is cheap on purpose (no torch, no vendor toolkits);
the public API lives in `edgebuild.api`.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
