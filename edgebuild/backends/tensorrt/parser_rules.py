"""TensorRT's ONNX-parser operator support matrix, transcribed (coverage.py reads it).

Why a transcription: the reviewer wants to know, before any GPU or TensorRT install is
at hand, which nodes of an ONNX model the parser (onnx-tensorrt, built into TensorRT as
libnvonnxparser) imports natively and which need a plugin. The parser's own table is
`docs/operators.md` in onnx/onnx-tensorrt; each `Matrix` below names the exact commit it
was read from and the TensorRT version that commit documents. Rows are complete: every
operator in the table, its Y/N, its "Supported Types" exactly as written, and its
"Restrictions" shortened (backticks kept, long lists abridged, meaning unchanged).

How the versions are stored: the newest table (11.1) is written out in full; older ones
are the 11.1 rows minus the operators they do not list, plus the rows that read
differently in them (each such row transcribed in full from that version's file). The
per-version counts are checked by tests/unit/test_tensorrt_coverage.py.

Verified facts about the sources:

* 10.1: onnx/onnx-tensorrt tag release/10.1-GA = branch 10.1-GA = commit 96e78110...
  ("ONNX-TensorRT 10.1 GA release", 2024-06-17), read from the repository snapshot.
  CMakeLists.txt says 10.1.0 and the README targets TensorRT 10.1, but the first line of
  operators.md at that commit still says "TensorRT 10.0 supports operators in the
  inclusive range of opset 9 to opset 20" (not updated for 10.1). The row typos
  "INF64" (ConstantOfShape) and "is_traning" (Dropout) are read as INT64 / is_training.
* 10.15 and 11.1: the onnx-tensorrt commits NVIDIA/TensorRT pins as its parsers/onnx
  submodule in "TensorRT 10.15 OSS Release" (9973b2f4ab5c0d0055e9d36cd94a5692f8f8da1f,
  branch release/10.15) and "TensorRT 11.1 OSS Release"
  (82d1dca801c8318a5605399d5240780d0679e4e1, main), read from the stored file index.
  Both say "opset 9 to opset 24"; the two tables differ only in `Swish` (11.1 adds it).
* The parser dispatches on `op_type` alone (ModelImporter.cpp, parseNode): an op_type
  with no built-in importer is imported as a model-local function when the model has
  one of that name, else by FallbackPluginImporter, which needs a TensorRT plugin of
  that name in the plugin registry. It only warns for ai.onnx opsets below 7.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

REPO = "onnx/onnx-tensorrt"
PATH = "docs/operators.md"


@dataclass(frozen=True)
class OpSupport:
    """One row of the support matrix.

    `types` are the matrix's own names (FP32, FP16, BF16, INT32, INT64, INT8, INT4, FP8,
    FP4, UINT8, BOOL); empty for unsupported ops. `restriction` is the row's
    "Restrictions" cell, shortened.
    """

    op: str
    supported: bool
    types: tuple[str, ...] = ()
    restriction: str = ""


@dataclass(frozen=True)
class Matrix:
    """One TensorRT version's matrix and where it was read."""

    trt_version: str
    commit: str
    pinned_by: str
    opset_min: int
    opset_max: int
    data_types: tuple[str, ...]
    ops: Mapping[str, OpSupport]

    @property
    def source(self) -> str:
        """'onnx/onnx-tensorrt docs/operators.md @ <40-hex> (TensorRT 10.1)'."""
        return f"{REPO} {PATH} @ {self.commit} (TensorRT {self.trt_version})"

    @property
    def unsupported(self) -> tuple[str, ...]:
        """The ops the matrix marks N."""
        return tuple(op for op, row in self.ops.items() if not row.supported)


def Y(op: str, types: str, restriction: str = "") -> OpSupport:  # noqa: N802 - reads as the doc
    """A row marked Y, types as the matrix writes them ("FP32, FP16, BF16")."""
    return OpSupport(op, True, tuple(t.strip() for t in types.split(",") if t.strip()),
                     restriction)


def N(op: str, restriction: str = "") -> OpSupport:  # noqa: N802
    """A row marked N: the parser has no importer, so the node needs a plugin."""
    return OpSupport(op, False, (), restriction)


# TensorRT 11.1, onnx/onnx-tensorrt @ 7c51a63a719180eb5160c874c111746f3fb46a6b, in the
# table's order.
_ROWS_11_1: tuple[OpSupport, ...] = (
    Y("Abs", "FP32, FP16, BF16, INT32, INT64"),
    Y("Acos", "FP32, FP16, BF16"),
    Y("Acosh", "FP32, FP16, BF16"),
    Y("Add", "FP32, FP16, BF16, INT32, INT64"),
    N("AffineGrid"),
    Y("And", "BOOL"),
    Y("ArgMax", "FP32, FP16, BF16, INT32, INT64"),
    Y("ArgMin", "FP32, FP16, BF16, INT32, INT64"),
    Y("Asin", "FP32, FP16, BF16"),
    Y("Asinh", "FP32, FP16, BF16"),
    Y("Atan", "FP32, FP16, BF16"),
    Y("Atanh", "FP32, FP16, BF16"),
    Y("Attention", "FP32, FP16, BF16, INT8, FP8",
      "`Q`, `K`, `V`, `attn_mask` must be 4D; `past_key`, `past_value`, `nonpad_kv_seqlen` "
      "inputs, `present_key`, `present_value`, `qk_matmul_output` outputs and "
      "`qk_matmul_output_mode`, `softcap` attributes unsupported; `q_num_heads`/`kv_num_heads` "
      "taken from dim 1 of `Q` and `K`/`V`"),
    Y("AveragePool", "FP32, FP16, BF16", "2D or 3D pooling only; `dilations` empty or all ones"),
    Y("BatchNormalization", "FP32, FP16, BF16"),
    N("Bernoulli"),
    N("BitShift"),
    N("BitwiseAnd"),
    N("BitwiseNot"),
    N("BitwiseOr"),
    N("BitwiseXor"),
    Y("BlackmanWindow", "FP32, FP16"),
    Y("Cast", "FP32, FP16, BF16, INT32, INT64, UINT8, BOOL"),
    Y("CastLike", "FP32, FP16, BF16, INT32, INT64, UINT8, BOOL"),
    Y("Ceil", "FP32, FP16, BF16"),
    N("Col2Im"),
    Y("Celu", "FP32, FP16, BF16"),
    N("CenterCropPad"),
    Y("Clip", "FP32, FP16, BF16"),
    N("Compress"),
    Y("Concat", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    N("ConcatFromSequence"),
    Y("Constant", "FP32, FP16, BF16, FP8, FP4, INT4, INT32, INT64, BOOL",
      "`sparse_value`, `value_string`, `value_strings` attributes unsupported"),
    Y("ConstantOfShape", "FP32, FP16, BF16, FP8, FP4, INT4, INT32, INT64, BOOL"),
    Y("Conv", "FP32, FP16, BF16"),
    N("ConvInteger"),
    Y("ConvTranspose", "FP32, FP16, BF16"),
    Y("Cos", "FP32, FP16, BF16"),
    Y("Cosh", "FP32, FP16, BF16"),
    Y("CumSum", "FP32, FP16, BF16", "`axis` must be a build-time constant"),
    N("DFT"),
    Y("DeformConv", "FP32, FP16",
      "`input` must have 1D or 2D spatial dims; begin and end `pads` equal per axis"),
    Y("DepthToSpace", "FP32, FP16, BF16, INT32, INT64"),
    Y("DequantizeLinear", "INT8, FP8, FP4, INT4", "`x_zero_point` must be zero"),
    N("Det"),
    Y("Div", "FP32, FP16, BF16, INT32, INT64"),
    Y("Dropout", "FP32, FP16, BF16", "`is_training` must be an initializer and evaluate to False"),
    N("DynamicQuantizeLinear",
      "TensorRT's IDynamicQuantize can be composed as a model-local function"),
    Y("Einsum", "FP32, FP16, BF16"),
    Y("Elu", "FP32, FP16, BF16"),
    Y("Equal", "FP32, FP16, BF16, INT32, INT64"),
    Y("Erf", "FP32, FP16, BF16"),
    Y("Exp", "FP32, FP16, BF16"),
    Y("Expand", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("EyeLike", "FP32, FP16, BF16, INT32, INT64, BOOL", "`input` must have static dimensions"),
    Y("Flatten", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("Floor", "FP32, FP16, BF16"),
    Y("Gather", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("GatherElements", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("GatherND", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("Gelu", "FP32, FP16, BF16, INT8, INT32, INT64"),
    Y("Gemm", "FP32, FP16, BF16"),
    Y("GlobalAveragePool", "FP32, FP16, BF16"),
    Y("GlobalLpPool", "FP32, FP16, BF16"),
    Y("GlobalMaxPool", "FP32, FP16, BF16"),
    Y("Greater", "FP32, FP16, BF16, INT32, INT64"),
    Y("GreaterOrEqual", "FP32, FP16, BF16, INT32, INT64"),
    Y("GridSample", "FP32, FP16", "Input must be 4D input"),
    Y("GroupNormalization", "FP32, FP16, BF16"),
    Y("GRU", "FP32, FP16, BF16", "bidirectional: same activations both directions"),
    Y("HammingWindow", "FP32, FP16"),
    Y("HannWindow", "FP32, FP16"),
    Y("HardSigmoid", "FP32, FP16, BF16"),
    Y("HardSwish", "FP32, FP16, BF16"),
    Y("Hardmax", "FP32, FP16, BF16", "`axis` dimension of input must be a build-time constant"),
    Y("Identity", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("If", "FP32, FP16, BF16, INT32, INT64, BOOL",
      "branch outputs must have the same rank and different names"),
    Y("ImageScaler", "FP32, FP16, BF16"),
    N("ImageDecoder"),
    Y("InstanceNormalization", "FP32, FP16, BF16"),
    Y("IsInf", "FP32, FP16, BF16"),
    Y("IsNaN", "FP32, FP16, BF16, INT32, INT64"),
    Y("LayerNormalization", "FP32, FP16, BF16", "Only the first output `Y` is supported"),
    Y("LeakyRelu", "FP32, FP16, BF16"),
    Y("Less", "FP32, FP16, BF16, INT32, INT64"),
    Y("LessOrEqual", "FP32, FP16, BF16, INT32, INT64"),
    Y("Log", "FP32, FP16, BF16"),
    Y("LogSoftmax", "FP32, FP16, BF16"),
    Y("Loop", "FP32, FP16, BF16, INT32, INT64, BOOL",
      "scan output length cannot be dynamic; loop-carried shapes must not change across "
      "iterations"),
    Y("LRN", "FP32, FP16, BF16"),
    Y("LSTM", "FP32, FP16, BF16",
      "bidirectional: same activations both directions; `input_forget` must be 0; `layout` must "
      "be 0"),
    Y("LpNormalization", "FP32, FP16, BF16"),
    Y("LpPool", "FP32, FP16, BF16", "`dilations` must be empty or all ones"),
    Y("MatMul", "FP32, FP16, BF16"),
    N("MatMulInteger"),
    Y("Max", "FP32, FP16, BF16, INT32, INT64"),
    Y("MaxPool", "FP32, FP16, BF16",
      "2D or 3D pooling only; `Indices` output unsupported; `dilations` empty or all ones"),
    N("MaxRoiPool"),
    N("MaxUnpool"),
    Y("Mean", "FP32, FP16, BF16, FP8, INT32, INT64"),
    Y("MeanVarianceNormalization", "FP32, FP16, BF16"),
    N("MelWeightMatrix"),
    Y("Min", "FP32, FP16, BF16, INT32, INT64"),
    Y("Mish", "FP32, FP16"),
    Y("Mod", "FP32, FP16, BF16, INT32, INT64"),
    Y("Mul", "FP32, FP16, BF16, INT32, INT64"),
    N("Multinomial"),
    Y("Neg", "FP32, FP16, BF16, INT32, INT64"),
    N("NegativeLogLikelihoodLoss"),
    Y("NonMaxSuppression", "FP32, FP16"),
    Y("NonZero", "FP32, FP16"),
    Y("Not", "BOOL"),
    Y("OneHot", "FP32, FP16, BF16, INT32, INT64, BOOL", "`depth` must be a build-time constant"),
    N("Optional"),
    N("OptionalGetElement"),
    N("OptionalHasElement"),
    Y("Or", "BOOL"),
    Y("Pad", "FP32, FP16, BF16, INT32, INT64"),
    Y("ParametricSoftplus", "FP32, FP16, BF16"),
    Y("Pow", "FP32, FP16, BF16, INT32, INT64"),
    Y("PRelu", "FP32, FP16, BF16"),
    N("QLinearConv"),
    N("QLinearMatMul"),
    Y("QuantizeLinear", "FP32, FP16, BF16", "`y_zero_point` must be 0"),
    Y("RandomNormal", "FP32, FP16, BF16", "`seed` value is ignored by TensorRT"),
    Y("RandomNormalLike", "FP32, FP16, BF16", "`seed` value is ignored by TensorRT"),
    Y("RandomUniform", "FP32, FP16, BF16", "`seed` value is ignored by TensorRT"),
    Y("RandomUniformLike", "FP32, FP16, BF16", "`seed` value is ignored by TensorRT"),
    Y("Range", "FP32, FP16, BF16, INT32, INT64"),
    Y("Reciprocal", "FP32, FP16, BF16"),
    Y("ReduceL1", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    Y("ReduceL2", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    Y("ReduceLogSum", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    Y("ReduceLogSumExp", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    Y("ReduceMax", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    Y("ReduceMean", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    Y("ReduceMin", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    Y("ReduceProd", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    Y("ReduceSum", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    Y("ReduceSumSquare", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    N("RegexFullMatch"),
    Y("Relu", "FP32, FP16, BF16, INT32, INT64"),
    Y("Reshape", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("Resize", "FP32, FP16, BF16",
      "coordinate_transformation_mode: half_pixel, pytorch_half_pixel, tf_half_pixel_for_nn, "
      "asymmetric, align_corners; mode: nearest, linear; nearest_mode: floor, ceil, "
      "round_prefer_floor, round_prefer_ceil; keep_aspect_ratio_policy: stretch; tensor "
      "`scales` needs `axes` = iota of rank(input); no antialias"),
    Y("ReverseSequence", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("RMSNormalization", "FP32, FP16, BF16"),
    Y("RNN", "FP32, FP16, BF16", "bidirectional: same activations both directions"),
    Y("RoiAlign", "FP32, FP16"),
    Y("RotaryEmbedding", "FP32, FP16, BF16", "`position_ids` must be INT64"),
    Y("Round", "FP32, FP16, BF16"),
    Y("STFT", "FP32", "`frame_step` and `window` must be initializers; input must be real-valued"),
    Y("ScaledTanh", "FP32, FP16, BF16"),
    Y("Scan", "FP32, FP16, BF16"),
    Y("Scatter", "FP32, FP16, BF16, INT32, INT64"),
    Y("ScatterElements", "FP32, FP16, BF16, INT32, INT64"),
    Y("ScatterND", "FP32, FP16, BF16, INT32, INT64",
      "`reduction` other than `none` is not supported"),
    Y("Selu", "FP32, FP16, BF16"),
    N("SequenceAt"),
    N("SequenceConstruct"),
    N("SequenceEmpty"),
    N("SequenceErase"),
    N("SequenceInsert"),
    N("SequenceLength"),
    N("SequenceMap"),
    Y("Shape", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("Shrink", "FP32, FP16, BF16, INT32, INT64"),
    Y("Sigmoid", "FP32, FP16, BF16"),
    Y("Sign", "FP32, FP16, BF16, INT32, INT64"),
    Y("Sin", "FP32, FP16, BF16"),
    Y("Sinh", "FP32, FP16, BF16"),
    Y("Size", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("Slice", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("Softmax", "FP32, FP16, BF16"),
    N("SoftmaxCrossEntropyLoss"),
    Y("Softplus", "FP32, FP16, BF16"),
    Y("Softsign", "FP32, FP16, BF16"),
    Y("SpaceToDepth", "FP32, FP16, BF16, INT32, INT64"),
    Y("Split", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    N("SplitToSequence"),
    Y("Sqrt", "FP32, FP16, BF16"),
    Y("Squeeze", "FP32, FP16, BF16, INT32, INT64, BOOL", "`axes` must be resolvable to a constant"),
    N("StringConcat"),
    N("StringNormalizer"),
    N("StringSplit"),
    Y("Sub", "FP32, FP16, BF16, INT32, INT64"),
    Y("Sum", "FP32, FP16, BF16, INT32, INT64"),
    Y("Swish", "FP32, FP16, BF16"),
    Y("Tan", "FP32, FP16, BF16"),
    Y("Tanh", "FP32, FP16, BF16"),
    Y("TensorScatter", "FP32, FP16, BF16, INT32",
      "`past_cache` and `update` must be 4D. `axis` must be -2"),
    N("TfIdfVectorizer"),
    Y("ThresholdedRelu", "FP32, FP16, BF16"),
    Y("Tile", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("TopK", "FP32, FP16, BF16, INT32, INT64",
      "`sorted` must be 1. `K` input must be less than 3840"),
    Y("Transpose", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("Trilu", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    N("Unique"),
    Y("Unsqueeze", "FP32, FP16, BF16, INT32, INT64, BOOL",
      "`axes` must be resolvable to a constant"),
    Y("Upsample", "FP32, FP16, BF16"),
    Y("Where", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("Xor", "BOOL"),
)

# Rows that read differently in the 10.1 table (96e781103cfc4adf4a6bb557e94bac8e693f6f4c).
_ROWS_CHANGED_IN_10_1: tuple[OpSupport, ...] = (
    N("BlackmanWindow"),
    Y("Constant", "FP32, FP16, BF16, INT32, INT64, BOOL",
      "`sparse_value`, `value_string`, `value_strings` attributes unsupported"),
    Y("ConstantOfShape", "FP32, FP16, BF16, INT32, INT64, BOOL"),
    Y("CumSum", "FP32, FP16, BF16", "`axis` must be an initializer"),
    Y("DequantizeLinear", "INT8, FP8, INT4", "`x_zero_point` must be zero"),
    Y("Dropout", "FP32, FP16, BF16", "`is_training` must be an initializer and evaluate to False"),
    N("DynamicQuantizeLinear"),
    N("HammingWindow"),
    N("HannWindow"),
    Y("Pad", "FP32, FP16, BF16, INT32, INT64", "`axes` must be an initializer"),
    Y("Pow", "FP32, FP16, BF16"),
    N("STFT"),
    Y("ScatterND", "FP32, FP16, BF16, INT32, INT64", "`reduction` is not supported"),
    Y("Slice", "FP32, FP16, BF16, INT32, INT64, BOOL", "`axes` must be an initializer"),
    Y("Squeeze", "FP32, FP16, BF16, INT32, INT64, BOOL", "`axes` must be an initializer"),
    Y("Unsqueeze", "FP32, FP16, BF16, INT32, INT64, BOOL", "`axes` must be a constant tensor"),
)
# Operators the 10.1 table does not list at all (and which the 10.15 table lacks).
_NOT_IN_10_1 = ("Attention", "RMSNormalization", "RotaryEmbedding", "Swish", "TensorScatter")
_NOT_IN_10_15 = ("Swish",)

_TYPES_10 = ("DOUBLE", "FP32", "FP16", "BF16", "INT32", "INT64", "FP8", "INT8", "INT4",
             "UINT8", "BOOL")
_TYPES_10_15 = ("DOUBLE", "FP32", "FP16", "BF16", "FP8", "FP4", "INT32", "INT64", "INT8",
                "INT4", "UINT8", "BOOL")


def _table(removed: tuple[str, ...], changed: tuple[OpSupport, ...] = ()
           ) -> Mapping[str, OpSupport]:
    replaced = {row.op: row for row in changed}
    return MappingProxyType({row.op: replaced.get(row.op, row) for row in _ROWS_11_1
                             if row.op not in removed})


MATRICES: tuple[Matrix, ...] = (
    Matrix("10.1", "96e781103cfc4adf4a6bb557e94bac8e693f6f4c",
           "onnx/onnx-tensorrt tag release/10.1-GA (newest release in the repository "
           "snapshot)", 9, 20, _TYPES_10, _table(_NOT_IN_10_1, _ROWS_CHANGED_IN_10_1)),
    Matrix("10.15", "fa5aa9f61e7781d2ca8f5351d42c1f19525a6124",
           "NVIDIA/TensorRT release/10.15, parsers/onnx submodule", 9, 24, _TYPES_10_15,
           _table(_NOT_IN_10_15)),
    Matrix("11.1", "7c51a63a719180eb5160c874c111746f3fb46a6b",
           "NVIDIA/TensorRT main (TensorRT 11.1 OSS Release), parsers/onnx submodule", 9, 24,
           _TYPES_10_15, _table(())),
)
LATEST = MATRICES[-1]
SOURCE = "; ".join(m.source for m in MATRICES)

# What the matrix's preamble says about types an op's row does not list.
TYPE_NOTES: Mapping[str, str] = MappingProxyType({
    "DOUBLE": "limited DOUBLE support: TensorRT casts it down to FP32, clamping to +-FLT_MAX",
    "INT8": "INT8 is a quantized type: only through Q/DQ from a wider float type",
    "INT4": "INT4 is a quantized type: only through Q/DQ from a wider float type",
    "FP8": "FP8 is a quantized type: only through Q/DQ from a wider float type",
    "FP4": "FP4 is a quantized type: only through Q/DQ from a wider float type",
    "UINT8": "UINT8 is only supported as a network input or output type",
})


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def matrix_for(trt_version: str) -> Matrix:
    """The newest matrix documenting `trt_version` or an earlier release (the oldest if
    `trt_version` is older than all): 10.3 on a Jetson reads the 10.1 table, not 11.1's
    newer ops."""
    wanted = _version_key(trt_version)
    if not wanted:
        raise ValueError(f"not a TensorRT version: {trt_version!r} (e.g. '10.3')")
    older = [m for m in MATRICES if _version_key(m.trt_version) <= wanted]
    return older[-1] if older else MATRICES[0]
