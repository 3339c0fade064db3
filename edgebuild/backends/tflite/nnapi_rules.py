"""The NNAPI delegate's per-op rules, transcribed (nnapi.py explains the source and
how they are read; this file is the data).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

SOURCE = (
    "TFLite NNAPI delegate, NNAPIDelegateKernel::Validate in "
    "google-ai-edge/LiteRT tflite/delegates/nnapi/nnapi_delegate.cc @ "
    "5c8a6d4b8063d83e0aaf1cc86b0da27570677daf (cross-checked with tensorflow/tensorflow "
    "tensorflow/lite/delegates/nnapi/nnapi_delegate.cc @ "
    "acdcab508aba594419934b482957e13d4f5b2455); NNAPI levels from "
    "https://developer.android.com/ndk/reference/group/neural-networks"
)

# Levels as the delegate compares them: Android API levels up to 31, then NNAPI
# "feature level" codes, which are not tied to an API level (NeuralNetworksTypes.h:
# "After Android S, the NNAPI specification can be updated between Android API releases").
API27, API28, API29, API30, API31 = 27, 28, 29, 30, 31
FL6, FL7 = 1000006, 1000007
NEVER: None = None

_NNAPI_VERSION = {27: "NNAPI 1.0", 28: "NNAPI 1.1", 29: "NNAPI 1.2", 30: "NNAPI 1.3",
                  31: "NNAPI feature level 5"}


def level_name(level: int | None) -> str:
    """'API 29 (NNAPI 1.2)', 'NNAPI feature level 6', or 'never'."""
    if level is None:
        return "never"
    if level >= FL6:
        return f"NNAPI feature level {level - 1000000}"
    return f"API {level} ({_NNAPI_VERSION.get(level, 'NNAPI')})"


class Support(StrEnum):
    YES = "yes"
    NO = "no"
    CONDITIONAL = "conditional"


@dataclass(frozen=True)
class OpUse:
    """One kind of node in a model: same op, version, tensor types and checked facts.

    `input_type` is the data input's type (input 0, or the op's data operand: SELECT 1,
    SPLIT 1, TRANSPOSE_CONV 2), lower case ("float32", "int8"); `features` are the
    facts `Validate` looks at that a type alone does not say, e.g. "per-channel weights",
    "fused RELU6", "dilated", "asymmetric int8", "constant input".
    """

    name: str
    version: int
    count: int
    custom: bool = False
    input_type: str = ""
    output_type: str = ""
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class CoverageRow:
    """The delegate's verdict on one OpUse at one API level.

    `min_api` is the lowest Android API level at which the delegate accepts this op with
    these types and facts (None when no API level decides it: never, or an NNAPI feature
    level, see `min_level`).
    """

    op: str
    version: int
    count: int
    input_type: str
    output_type: str
    features: tuple[str, ...]
    supported: Support
    min_api: int | None
    min_level: str
    nnapi_op: str
    note: str


@dataclass(frozen=True)
class Rule:
    """What Validate demands of one builtin op.

    `types`: data-input type -> lowest level that accepts it; a type missing is refused,
    {"*": level} means Validate does not check the type. `features`: fact -> (lowest
    level or NEVER, why). `conditions`: checks on tensor values this table does not
    evaluate; a row that passes everything else is then "conditional".
    """

    nnapi: str
    max_version: int | None
    types: Mapping[str, int]
    min_level: int = API27
    output_types: Mapping[str, int | None] = field(default_factory=dict)
    features: Mapping[str, tuple[int | None, str]] = field(default_factory=dict)
    conditions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    no_activation_for: frozenset[str] = frozenset()  # types for which a fused activation is refused
    int8_converted: bool = False  # in NeedInt8Conversion: int8 runs as uint8 below API 30
    uint8_scale_rule: bool = False  # NNAPI < 1.2: input_scale * filter_scale < output_scale
    max_version_on_devices: int | None = None  # MUL: v3 when target devices are used


FQ = {"float32": API27, "uint8": API27, "int8": API27}  # ExpectIsFloatOrQuant8Operator
F32 = {"float32": API27}
ANY = {"*": API27}
RANK = {"rank>4": (NEVER, "NNAPI takes rank <= 4 here")}
FUSED_NONE = "no fused activation allowed"
DYNAMIC = "dynamic shape input"
_DYN = {DYNAMIC: (NEVER, "the shape/size/axis input must be a constant tensor")}
_SCALAR_OUT = {"scalar output": (NEVER, "scalar (rank 0) outputs are refused")}
_SCALAR_IN = {"scalar input": (NEVER, "scalar (rank 0) inputs are refused")}
_ZERO_SIZE = {"zero-size input": (NEVER, "inputs with no elements are refused")}
_SCALAR_OPERAND = {"non-constant scalar operand": (NEVER, "a scalar operand must be "
                                                          "constant")}
_ALIGN = {
    "align_corners": (API30, "align_corners"),
    "half_pixel_centers": (API30, "half_pixel_centers"),
}


def _with(levels: Mapping[str, int], level: int) -> dict[str, int]:
    return {t: max(v, level) for t, v in levels.items()}


RULES: dict[str, Rule] = {
    "ADD": Rule("ADD", 2, {**FQ, "int32": API30}, features=RANK,
                no_activation_for=frozenset({"int32"}), int8_converted=True),
    "MUL": Rule("MUL", 2, {**FQ, "int32": API30}, features=RANK,
                no_activation_for=frozenset({"int32"}), int8_converted=True,
                max_version_on_devices=3),
    "SUB": Rule("SUB", 3, {"float32": API28, "uint8": API29, "int8": API29, "int32": API30},
                features=RANK, no_activation_for=frozenset({"int32"}), int8_converted=True),
    "DIV": Rule("DIV", 1, {"float32": API28}, features=RANK),
    "AVERAGE_POOL_2D": Rule(
        "AVERAGE_POOL_2D", 2, FQ, int8_converted=True,
        features={"quantized window>256": (API29, "a quantized window over 256 elements "
                                           "(only with named target devices, the "
                                           "default from API 29)")}),
    "MAX_POOL_2D": Rule("MAX_POOL_2D", 2, FQ, int8_converted=True),
    "L2_POOL_2D": Rule("L2_POOL_2D", 1, F32,
                       features={"fused": (API29, "a fused activation")}),
    "CONV_2D": Rule(
        "CONV_2D (GROUPED_CONV_2D when grouped)", 5,
        {"float32": API27, "uint8": API27, "int8": API29},
        features={"per-channel weights": (API29, "per-channel weights"),
                  "hybrid (float input, int8 weights)": (API29, "hybrid (float input, "
                                                         "int8 weights)"),
                  "dilated": (API29, "dilation"),
                  "grouped": (API29, "grouped convolution")},
        int8_converted=True, uint8_scale_rule=True),
    "DEPTHWISE_CONV_2D": Rule(
        "DEPTHWISE_CONV_2D", 3, {"float32": API27, "uint8": API27, "int8": API29},
        features={"dilated": (API29, "dilation")},
        int8_converted=True, uint8_scale_rule=True),
    "FULLY_CONNECTED": Rule(
        "FULLY_CONNECTED", 5, {"float32": API27, "uint8": API27, "int8": API29},
        output_types={"float32": API27, "uint8": API27, "int8": API27},  # int16 refused
        features={"hybrid (float input, int8 weights)": (API29, "hybrid (float input, "
                                                         "int8 weights)"),
                  "keep_num_dims": (API30, "keep_num_dims")},
        int8_converted=True, uint8_scale_rule=True),
    "HARD_SWISH": Rule(
        "HARD_SWISH", None, FQ, int8_converted=True,
        notes=("below API 30 the delegate lowers it into basic NNAPI ops; native "
               "HARD_SWISH from API 30",)),
    "SOFTMAX": Rule(
        "SOFTMAX", 2, FQ, output_types={"float32": API27, "uint8": API27, "int8": API27},
        features={**RANK, "rank 1 or 3": (API29, "a rank 1 or 3 input")},
        int8_converted=True),
    "RESHAPE": Rule(
        "RESHAPE", 1, {**FQ, "int32": FL6}, features={**RANK, **_DYN, **_SCALAR_OUT},
        int8_converted=True),
    "RESIZE_BILINEAR": Rule(
        "RESIZE_BILINEAR", 3, {"float32": API27, "uint8": API29, "int8": API29},
        features={**_DYN, **_ALIGN, "non-square output": (API29, "output height != width")},
        int8_converted=True),
    "RESIZE_NEAREST_NEIGHBOR": Rule(
        "RESIZE_NEAREST_NEIGHBOR", 3, _with(FQ, API29), min_level=API29,
        features={**_DYN, **_ALIGN}, int8_converted=True),
    "SQUEEZE": Rule("SQUEEZE", 1, ANY, min_level=API28, features={
        "no squeeze_dims": (API29, "a SQUEEZE without squeeze_dims")}),
    "L2_NORMALIZATION": Rule(
        "L2_NORMALIZATION", 2, {"float32": API27, "uint8": API29, "int8": API29},
        no_activation_for=frozenset({"*"}), int8_converted=True,
        conditions=("rank 4 input below API 29",)),
    "LOCAL_RESPONSE_NORMALIZATION": Rule("LOCAL_RESPONSE_NORMALIZATION", 1, ANY),
    "CONCATENATION": Rule(
        "CONCATENATION", 2, {"float16": API27, **FQ}, features=RANK,
        no_activation_for=frozenset({"*"}), int8_converted=True,
        notes=("uint8 below API 29: all inputs need the same scale and zero point",)),
    "DEQUANTIZE": Rule(
        "DEQUANTIZE", 2, {"uint8": API27, "int8": API29, "float16": API30},
        features={"asymmetric int8": (API30, "asymmetric int8 (API 29 takes zero point 0 "
                                      "only)")}),
    "FLOOR": Rule("FLOOR", 1, ANY),
    "RELU": Rule("RELU", 2, FQ, int8_converted=True),
    "RELU_N1_TO_1": Rule("RELU1", 2, FQ, int8_converted=True),
    "RELU6": Rule("RELU6", 2, FQ, int8_converted=True),
    "LOGISTIC": Rule("LOGISTIC", 2, FQ, int8_converted=True),
    "TANH": Rule("TANH", 2, {"float32": API27, "uint8": API29, "int8": API29},
                 int8_converted=True),
    "PAD": Rule("PAD", 2, {"float32": API28, "uint8": API29, "int8": API29},
                min_level=API28, int8_converted=True, features=_ZERO_SIZE),
    "PADV2": Rule("PAD_V2", 2, _with(FQ, API29), min_level=API29, int8_converted=True,
                  features=_ZERO_SIZE),
    "SPACE_TO_BATCH_ND": Rule("SPACE_TO_BATCH_ND", 2, ANY, min_level=API28,
                              int8_converted=True),
    "BATCH_TO_SPACE_ND": Rule("BATCH_TO_SPACE_ND", 2, ANY, min_level=API28,
                              int8_converted=True, conditions=("all crops 0",)),
    "STRIDED_SLICE": Rule("STRIDED_SLICE", 2, _with(FQ, API28), min_level=API28,
                          int8_converted=True),
    "TRANSPOSE": Rule("TRANSPOSE", 2, ANY, min_level=API28, features=_DYN,
                      int8_converted=True),
    "ABS": Rule("ABS", 1, {"float32": API29}, min_level=API29),
    "EXP": Rule("EXP", 1, {"float32": API29}, min_level=API29),
    "LOG": Rule("LOG", 1, {"float32": API29}, min_level=API29),
    "POW": Rule("POW", 1, {"float32": API29}, min_level=API29),
    "RSQRT": Rule("RSQRT", 2, {"float32": API29, "uint8": FL7, "int8": FL7}, min_level=API29),
    "SQRT": Rule("SQRT", 1, {"float32": API29}, min_level=API29),
    "SIN": Rule("SIN", 1, {"float32": API29}, min_level=API29),
    "COS": Rule("COS", 1, {"float32": API29}, min_level=API29),
    "SLICE": Rule("SLICE", 2, {"float32": API29, "int32": API29, "uint8": API29,
                               "int8": API29}, min_level=API29, int8_converted=True,
                  features={"int64 begin/size": (NEVER, "begin and size must be int32")}),
    "TRANSPOSE_CONV": Rule("TRANSPOSE_CONV", 4, {"*": API29}, min_level=API29,
                           features=_DYN, int8_converted=True),
    "RNN": Rule("RNN", 1, ANY, conditions=("float32 weights",)),
    "SPACE_TO_DEPTH": Rule("SPACE_TO_DEPTH", 2, FQ, int8_converted=True),
    "DEPTH_TO_SPACE": Rule("DEPTH_TO_SPACE", None, FQ, int8_converted=True),
    "SVDF": Rule("SVDF", 1, ANY, min_level=API28, conditions=("float32 weights",)),
    "LSTM": Rule("LSTM / QUANTIZED_16BIT_LSTM", 3, ANY, min_level=API28,
                 conditions=("kernel variant, weight types and quantization checked "
                             "per node",)),
    "MEAN": Rule("MEAN", 2, {"float32": API28, "uint8": API29, "int8": API29},
                 min_level=API28, int8_converted=True, features={**RANK, **_SCALAR_OUT}),
    "EMBEDDING_LOOKUP": Rule("EMBEDDING_LOOKUP", 1, ANY, conditions=("float32 values",)),
    "HASHTABLE_LOOKUP": Rule("HASHTABLE_LOOKUP", 1, ANY, conditions=("float32 output",)),
    "MAXIMUM": Rule("MAXIMUM", 3, _with({**FQ, "int32": API27}, API29), min_level=API29,
                    int8_converted=True, features=_SCALAR_OPERAND),
    "MINIMUM": Rule("MINIMUM", 3, _with({**FQ, "int32": API27}, API29), min_level=API29,
                    int8_converted=True, features=_SCALAR_OPERAND),
    "CAST": Rule("CAST", 1, {"float32": API29, "int32": API29, "uint8": API29,
                             "int8": API30}, min_level=API29,
                 output_types={"float32": API29, "int32": API29, "uint8": API29,
                               "int8": API30}),
    "LEAKY_RELU": Rule("PRELU", 1, _with(FQ, API29), min_level=API29, int8_converted=True),
    "PRELU": Rule("PRELU", 1, _with(FQ, API29), min_level=API29, int8_converted=True),
    "TILE": Rule("TILE", 1, _with({**FQ, "int32": API27}, API29), min_level=API29,
                 int8_converted=True),
    "LOGICAL_OR": Rule("LOGICAL_OR", 1, {"bool": API29}, min_level=API29),
    "LOGICAL_AND": Rule("LOGICAL_AND", 1, {"bool": API29}, min_level=API29),
    "LOGICAL_NOT": Rule("LOGICAL_NOT", 1, {"bool": API29}, min_level=API29),
    "NEG": Rule("NEG", 2, {"float32": API29, "int32": API29}, min_level=API29),
    "TOPK_V2": Rule("TOPK_V2", 2, _with({**FQ, "int32": API27}, API29), min_level=API29,
                    features=_DYN, int8_converted=True),
    "SELECT": Rule("SELECT", 2, _with({**FQ, "int32": API27}, API29), min_level=API29,
                   int8_converted=True, features={"broadcast condition": (
                       NEVER, "condition and values must have one shape")}),
    "GATHER": Rule("GATHER", 2, _with({**FQ, "float16": API27, "int32": API27}, API29),
                   min_level=API29, int8_converted=True,
                   features={"int64 indices": (NEVER, "indices must be int32"),
                             "scalar indices": (NEVER, "0-d indices are refused")}),
    "EXPAND_DIMS": Rule("EXPAND_DIMS", 1, _with({**FQ, "float16": API27, "int32": API27},
                                               API29), min_level=API29, features=_DYN,
                        int8_converted=True),
    "SPLIT": Rule("SPLIT", 3, {"float32": API29, "uint8": API29, "int32": API29,
                               "int8": API30}, min_level=API29, features=_DYN),
    "SPLIT_V": Rule("SPLIT_V", 2, _with({**FQ, "int32": API27}, API30), min_level=API30,
                    conditions=("constant int32 size_splits and axis, no zero-size split",)),
    "LOG_SOFTMAX": Rule("LOG_SOFTMAX", 1, {"float32": API29}, min_level=API29),
    "QUANTIZE": Rule("QUANTIZE", 2, _with(FQ, API29), min_level=API29,
                     output_types={"uint8": API29, "int8": API30}),
    "REDUCE_ANY": Rule("REDUCE_ANY", 2, ANY, min_level=API29, features=_SCALAR_OUT),
    "REDUCE_MIN": Rule("REDUCE_MIN", 2, _with(FQ, API29), min_level=API29,
                       int8_converted=True, features=_SCALAR_IN),
    "REDUCE_MAX": Rule("REDUCE_MAX", 2, _with(FQ, API29), min_level=API29,
                       int8_converted=True, features=_SCALAR_IN),
    "REDUCE_PROD": Rule("REDUCE_PROD", 1, {"float32": API29}, min_level=API29,
                        features=_SCALAR_OUT),
    "SUM": Rule("REDUCE_SUM", 1, {"float32": API29}, min_level=API29, features=_SCALAR_OUT),
    "ELU": Rule("ELU", 1, {"float32": API30}, min_level=API30),
    "FILL": Rule("FILL", 1, ANY, min_level=API30,
                 conditions=("constant int32/int64 dims, float32/int32/int64 value",)),
    "PACK": Rule("CONCATENATION + RESHAPE", 2, {"float32": API30, "int8": API30,
                                                "int32": FL6, "uint8": FL6},
                 min_level=API30, conditions=("axis not the last dimension before "
                                              "feature level 6",)),
    "UNPACK": Rule("UNPACK", 2, {"float32": API30, "uint8": API30, "int8": API30},
                   min_level=API30, features=RANK,
                   conditions=("rank > 1, axis not the last dimension",)),
    "SQUARED_DIFFERENCE": Rule("SQUARED_DIFFERENCE", 2,
                               {"float32": API28, "uint8": API29, "int8": API30,
                                "int32": API30}, min_level=API28, features=RANK),
    "BATCH_MATMUL": Rule("BATCH_MATMUL", 2, {"float32": FL6, "int32": FL6, "int8": FL6},
                         min_level=FL6, features=RANK,
                         conditions=("both inputs of one type, rank 2-4, no broadcast",)),
    "MIRROR_PAD": Rule("MIRROR_PAD", 2, {**_with(FQ, FL7), "int32": FL7}, min_level=FL7,
                       features=_ZERO_SIZE),
    "REVERSE_V2": Rule("REVERSE", 3, {**_with(FQ, FL7), "int32": FL7}, min_level=FL7),
    "ARG_MAX": Rule("ARGMAX", 2, _with({**FQ, "float16": API27, "int32": API27}, API29),
                    min_level=API29, int8_converted=True,
                    features={"int64 output": (NEVER, "output must be int32")}),
    "ARG_MIN": Rule("ARGMIN", 2, _with({**FQ, "float16": API27, "int32": API27}, API29),
                    min_level=API29, int8_converted=True,
                    features={"int64 output": (NEVER, "output must be int32")}),
    "DENSIFY": Rule("(folded into the weights)", None, ANY, min_level=API30,
                    features={}, conditions=("constant sparse weights",)),
    "LSH_PROJECTION": Rule("LSH_PROJECTION", 1, ANY,
                           conditions=("sparse projection needs API 29",)),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": Rule(
        "UNIDIRECTIONAL_SEQUENCE_LSTM", 2, ANY, min_level=API29,
        features={"hybrid (float input, int8 weights)": (NEVER, "hybrid is refused")},
        conditions=("20 or 24 inputs",)),
    "BIDIRECTIONAL_SEQUENCE_LSTM": Rule(
        "BIDIRECTIONAL_SEQUENCE_LSTM", 1, ANY, min_level=API29,
        features={"hybrid (float input, int8 weights)": (NEVER, "hybrid is refused")}),
    "UNIDIRECTIONAL_SEQUENCE_RNN": Rule(
        "UNIDIRECTIONAL_SEQUENCE_RNN", 1, ANY, min_level=API29,
        features={"hybrid (float input, int8 weights)": (NEVER, "hybrid is refused")}),
}
for _name in ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"):
    RULES[_name] = Rule(_name, 2, _with({**FQ, "bool": API27, "int32": API27}, API29),
                        min_level=API29, int8_converted=True)
