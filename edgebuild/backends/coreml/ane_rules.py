"""Neural Engine placement rules for MIL ops, each with its public source.

Apple publishes no list of the ops the Neural Engine runs; these rules come from
the sources below (community findings, themselves marked "incomplete and possibly
wrong"). An op without a rule is "unknown", never assumed to run there; Xcode's
Core ML performance report on a device is the ground truth.
"""

from __future__ import annotations

_HOLLANCE = "hollance/neural-engine d0bb5305a595a59142df47a4581e8b0b765a7385"

SOURCES: dict[str, str] = {
    "ane-layers": f"{_HOLLANCE} docs/unsupported-layers.md",
    "ane-fp16": f"{_HOLLANCE} docs/16-bit.md ('The ANE appears to use float16 for "
                "everything')",
}

_RNN = ("fallback", "RNN layers (LSTM, GRU) are known not to run on the ANE", "ane-layers")
_GATHER = ("fallback", "gather is known not to run on the ANE", "ane-layers")
_POOL = ("partial", "pooling runs on the ANE only with kernel <= 13 and stride <= 2",
         "ane-layers")
_POOL_SMALL = ("ane", "pooling with kernel <= 13 and stride <= 2", "ane-layers")
_POOL_LARGE = ("fallback", "pooling with kernel > 13 or stride > 2 is known not to run on "
               "the ANE", "ane-layers")
_UPSAMPLE = ("partial", "upsampling runs on the ANE with scale factors <= 2", "ane-layers")

# MIL op type -> (status, reason, source key); status: ane | fallback | partial
OP_RULES: dict[str, tuple[str, str, str]] = {
    "lstm": _RNN,
    "gru": _RNN,
    "rnn": _RNN,
    "gather": _GATHER,
    "gather_nd": _GATHER,
    "gather_along_axis": _GATHER,
    "conv": ("ane", "undilated convolution", "ane-layers"),
    "conv (dilated)": ("fallback", "dilated convolutions are known not to run on the ANE",
                       "ane-layers"),
    "conv_transpose": ("ane", "deconvolution is reported to work", "ane-layers"),
    **{f"{pool} (small)": _POOL_SMALL for pool in ("max_pool", "avg_pool", "l2_pool")},
    **{f"{pool} (kernel > 13 or stride > 2)": _POOL_LARGE
       for pool in ("max_pool", "avg_pool", "l2_pool")},
    "max_pool": _POOL,  # kernel/stride not constant: the rule's condition, unchecked
    "avg_pool": _POOL,
    "l2_pool": _POOL,
    "upsample_nearest_neighbor": _UPSAMPLE,
    "upsample_bilinear": _UPSAMPLE,
}

# (key, rule, source key)
GENERAL_RULES: list[tuple[str, str, str]] = [
    ("fp32", "the Neural Engine computes in fp16 only: ops computing in fp32 run on the "
             "GPU or CPU", "ane-fp16"),
    ("flexible", "Core ML may keep flexible (range) shapes off the Neural Engine; "
                 "enumerated shapes are the ANE-friendly form", "ane-layers"),
]
