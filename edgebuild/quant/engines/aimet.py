"""`quantize` with `engine: aimet`: Qualcomm's AIMET (aimet-onnx) computes the encodings.

AIMET simulates quantization on the ONNX graph (QuantizationSimModel), optimises the
weights' rounding — Sequential MSE (a per-layer search of the weight scale that
minimises the layer's output error) or AdaRound (learned up/down rounding per
weight, Nagel et al. 2020) — on the calibration samples, and exports the result as
QDQ ONNX (`to_onnx_qdq`): the same representation ONNX Runtime's quantizer writes, and
the one QNN consumes. The layers edgebuild keeps float (safety.py, exclude_nodes,
the budget's keep_float) get no quantizer. Imported only inside the worker; the
package is an optional extra (`pip install 'edgebuild[aimet]'`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.errors import StageError

if TYPE_CHECKING:
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.params import QuantizeParams

# edgebuild's calibration methods in AIMET's terms: TF-enhanced searches the range that
# minimises the quantization noise (SQNR) of each tensor's histogram, which is what
# `entropy` (KL divergence of the histograms) is for in ONNX Runtime.
# aimet-onnx documents no percentile scheme: the params refuse `method: percentile` with it.
SCHEMES = {"minmax": "min_max", "entropy": "tf_enhanced"}
INSTALL_HINT = ("install the optional extra: pip install 'edgebuild[aimet]' (aimet-onnx, "
                "a CPU wheel on PyPI; it needs no other torch than the one installed)")


def available() -> bool:
    """Whether aimet-onnx imports here (tests skip with the reason when it does not)."""
    try:
        import aimet_onnx  # noqa: F401
    except ImportError:
        return False
    return True


def quantize(source: Path, destination: Path, p: QuantizeParams, calibration: Samples,
             exclude: list[str], only: list[str] | None = None) -> None:
    """Quantize `source` to QDQ ONNX with AIMET; `exclude` stay float, `only` (sensitivity
    runs) restricts quantization to those nodes."""
    import onnx

    try:
        import aimet_onnx
        from aimet_onnx import QuantizationSimModel
    except ImportError as exc:
        raise StageError(f"quantize engine aimet needs the aimet-onnx package ({exc})",
                         INSTALL_HINT) from exc
    from edgebuild.quant.samples import feeds

    configs = Path(aimet_onnx.__file__).parent / "common" / "quantsim_config"
    config = "default_config_per_channel.json" if p.per_channel else "default_config.json"
    model = onnx.load(str(source))
    sim = QuantizationSimModel(model, param_type="int8", activation_type="int8",
                               quant_scheme=SCHEMES[p.method], config_file=str(configs / config),
                               providers=["CPUExecutionProvider"])
    _restrict(sim, model, exclude, only)
    samples = feeds(calibration)
    if p.weight_rounding == "seq_mse":
        aimet_onnx.apply_seq_mse(sim, samples, num_candidates=p.seq_mse_candidates)
    elif p.weight_rounding == "adaround":
        aimet_onnx.apply_adaround(sim, samples, num_iterations=p.adaround_iterations)
    sim.compute_encodings(samples)
    signed = p.activation_type == "int8"
    qdq = sim.to_onnx_qdq(force_activation_as="signed" if signed else "unsigned")
    onnx.save(qdq, str(destination))


def _restrict(sim: Any, model: Any, exclude: list[str], only: list[str] | None) -> None:
    """Disable every quantizer not on a tensor of a node that is quantized (an input, an
    output or a weight of a node outside `exclude`, and inside `only` when given)."""
    if not exclude and only is None:
        return
    skip, keep = set(exclude), None if only is None else set(only)
    wanted: set[str] = set()
    for node in model.graph.node:
        if node.name in skip or (keep is not None and node.name not in keep):
            continue
        wanted.update(node.input)
        wanted.update(node.output)
    for tensor, quantizer in sim.qc_quantize_op_dict.items():
        if tensor not in wanted:
            quantizer.enabled = False
