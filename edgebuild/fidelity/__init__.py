"""How far a build's outputs are from FP32's, and whether that is close enough: the
metrics (per channel, per position, decoded text, regions, matched boxes), the outputs
file they read, the one table of limits (`limits.LIMITS`) and the verdict. Below passes,
gates and backends: the accuracy gate, the quantizer's budget and a search's failure line
all judge with it."""
