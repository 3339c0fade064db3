"""A model's `metadata_props` kept out of onnxruntime's QNN preprocessing, then put back.

onnxruntime's `qnn_preprocess_model` (quantization/execution_providers/qnn/preprocess.py,
`save_and_reload_optimize_model`, line 194 in onnxruntime 1.32) does
`dict.update(model.metadata_props)`: a repeated protobuf field of key/value messages, not
pairs, so *any* model with a metadata entry raises `TypeError: cannot convert dictionary
update sequence element #0 to a sequence` (every Ultralytics export carries names, stride,
task, imgsz there). The entries are set aside before it runs and written back onto the
QDQ model afterwards, so the EPContext model that ships carries them as the fp16 build does.
"""

from __future__ import annotations

from pathlib import Path


def set_aside(source: Path, destination: Path) -> tuple[Path, dict[str, str]]:
    """`source` itself when it has no metadata entries; else a copy without them at
    `destination`, and the entries."""
    import onnx

    model = onnx.load(str(source))
    props = {p.key: p.value for p in model.metadata_props}
    if not props:
        return source, {}
    del model.metadata_props[:]
    onnx.save(model, str(destination))
    return destination, props


def put_back(path: Path, props: dict[str, str]) -> None:
    """Write `props` into the model at `path`, keeping any entry the tools added there."""
    if not props:
        return
    import onnx

    model = onnx.load(str(path))
    merged = {**props, **{p.key: p.value for p in model.metadata_props}}
    onnx.helper.set_model_props(model, merged)
    onnx.save(model, str(path))
