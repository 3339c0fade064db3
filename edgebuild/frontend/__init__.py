"""The recipe's PyTorch model as Python objects: built from its factory with safely loaded
weights, and wrapped with its declared pre/post-processing. Passes (export, prune) and the
FP32 reference (gates) both build it, so it sits below both."""
