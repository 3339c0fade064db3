"""all-MiniLM-L6-v2 (recipes/sentence-encoder.yaml): ONNX Runtime FP32 unfused vs fused
(ort-transformer-optimize), dynamic INT8 (quantize preset transformer), OpenVINO FP32,
OpenVINO's default (no precision hint: bf16 on a CPU with AMX or AVX-512 BF16), and NNCF
INT8 as the recipe's intel-cpu-int8 builds it (model_type transformer, preset mixed,
calibrated on its 100 passages of 128 tokens).

Each variant is timed at batch 1 at 16 and 128 tokens, interleaved round by round
(the order rotates), 2 threads; the figure is the median per call and the ratio to
ONNX Runtime FP32 unfused in the same run. Cosine is per sentence vs that FP32
model. Run: PYTHONPATH=. python benchmarks/transformer.py [--rounds 15]
Write the CPU's ISA next to any figure you copy (lscpu: AVX-512 VNNI/BF16 or not).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "models"))


def export(work: Path) -> Path:
    import onnx
    import onnxslim
    import sentence_encoder as se
    import torch

    model = se.build()
    ids = torch.ones(1, 16, dtype=torch.int64)
    raw = work / "raw.onnx"
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(model, (ids, ids), str(raw), input_names=["input_ids", "attention_mask"],
                      output_names=["embedding"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": axes, "attention_mask": axes})
    slim = work / "fp32.onnx"
    onnx.save(onnxslim.slim(onnx.load(str(raw))), str(slim))
    return slim


def variants(fp32: Path, work: Path) -> dict[str, Path]:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    from edgebuild.passes.ort_transformer import split_unsqueezes

    model = onnx.load(str(fp32))
    split_unsqueezes(model)
    onnx.save(model, str(work / "split.onnx"))
    fused = optimize_model(str(work / "split.onnx"), model_type="bert", opt_level=0,
                           num_heads=12, hidden_size=384)  # as the recipe: not detectable
    print("fusions:", {k: v for k, v in fused.get_fused_operator_statistics().items() if v})
    fused.save_model_to_file(str(work / "fused.onnx"))
    quantize_dynamic(fp32, work / "int8.onnx", per_channel=True, weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul", "Gemm"],
                     extra_options={"MatMulConstBOnly": True})
    # The fused graph quantized too: ORT turns Attention into QAttention.
    quantize_dynamic(work / "fused.onnx", work / "fused-int8.onnx", per_channel=True,
                     weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul", "Gemm", "Attention"],
                     extra_options={"MatMulConstBOnly": True})
    return {"ort-fp32": fp32, "ort-fp32-fused": work / "fused.onnx",
            "ort-int8-dynamic": work / "int8.onnx",
            "ort-int8-fused": work / "fused-int8.onnx"}


def runners(models: dict[str, Path], threads: int) -> dict[str, object]:
    import onnxruntime as ort
    import openvino as ov

    out: dict[str, object] = {}
    for name, path in models.items():
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        out[name] = lambda feed, s=session: s.run(None, feed)[0]
    core = ov.Core()
    f32 = {"INFERENCE_PRECISION_HINT": "f32"}
    for name, model, config in (("openvino-fp32", models["ort-fp32"], f32),
                                ("openvino-default", models["ort-fp32"], {}),
                                ("openvino-int8-nncf", nncf_int8(models["ort-fp32"]), f32)):
        compiled = core.compile_model(model, "CPU", {
            **config, "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads})
        print(f"{name}: inference precision "
              f"{compiled.get_property('INFERENCE_PRECISION_HINT')}")
        request = compiled.create_infer_request()
        out[name] = lambda feed, r=request: np.asarray(r.infer(feed)[0]).copy()
    return out


def nncf_int8(fp32: Path) -> object:
    """The recipe's intel-cpu-int8: NNCF's transformer scheme on the dynamic-sequence model."""
    import nncf
    import openvino as ov
    import sentence_encoder as se

    data = se.sentences(100, 128, 90)  # the recipe's seq128
    feeds = [{k: v[i:i + 1] for k, v in data.items()} for i in range(100)]
    return nncf.quantize(ov.convert_model(str(fp32)), nncf.Dataset(feeds),
                         preset=nncf.QuantizationPreset.MIXED, subset_size=100,
                         model_type=nncf.ModelType.TRANSFORMER)


def main() -> None:
    import sentence_encoder as se

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10, help="timed calls per round")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        run = runners(variants(export(work), work), args.threads)
        for length, words, count in ((16, 6, 100), (128, 90, 50)):
            data = se.sentences(count, length, words)
            feeds = [{k: v[i:i + 1] for k, v in data.items()} for i in range(count)]
            outs = {name: np.concatenate([f(feed) for feed in feeds]) for name, f in run.items()}
            ref = outs["ort-fp32"]
            cos = {n: float(np.mean(np.sum(o * ref, 1) / np.linalg.norm(o, axis=1)
                                    / np.linalg.norm(ref, axis=1))) for n, o in outs.items()}
            times: dict[str, list[float]] = {n: [] for n in run}
            names = list(run)
            for r in range(args.rounds):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    f = run[name]
                    start = time.perf_counter()
                    for c in range(args.calls):
                        f(feeds[c % count])
                    times[name].append((time.perf_counter() - start) / args.calls)
            base = float(np.median(times["ort-fp32"]))
            print(f"\nseq {length}: median ms per call, ratio to ort-fp32, cosine vs ort-fp32")
            for name in names:
                med = float(np.median(times[name]))
                print(f"  {name:18s} {med * 1e3:7.2f} ms  x{med / base:5.2f}  cos {cos[name]:.5f}")


if __name__ == "__main__":
    main()
