"""A small KServe v2 HTTP client (Triton's HTTP protocol with its binary-data extension),
standard library only: tritonclient lives in the server's environment (numpy<2), not in
edgebuild's, and the tensors go as raw bytes both ways, so no value is rounded by JSON.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from edgebuild.errors import StageError

if TYPE_CHECKING:
    import numpy as np

_DATATYPES = {"float32": "FP32", "float16": "FP16", "float64": "FP64", "uint8": "UINT8",
              "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
              "bool": "BOOL"}
_NUMPY = {v: k for k, v in _DATATYPES.items()}
TIMEOUT = 120


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")[:500]
        raise StageError(f"Triton answered {error.code} to {url}: {detail}") from error


def infer(base: str, model: str, feeds: dict[str, np.ndarray],
          outputs: list[str]) -> dict[str, np.ndarray]:
    """One inference request; the named outputs as numpy arrays."""
    import numpy as np

    arrays = {name: np.ascontiguousarray(value) for name, value in feeds.items()}
    header = {"inputs": [{"name": name, "shape": list(a.shape),
                          "datatype": _DATATYPES[str(a.dtype)],
                          "parameters": {"binary_data_size": a.nbytes}}
                         for name, a in arrays.items()],
              "outputs": [{"name": name, "parameters": {"binary_data": True}}
                          for name in outputs]}
    head = json.dumps(header).encode()
    body = head + b"".join(a.tobytes() for a in arrays.values())
    raw, headers = _post(f"{base}/v2/models/{model}/infer", body, {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(head))})
    size = int({k.lower(): v for k, v in headers.items()}.get(
        "inference-header-content-length", len(raw)))
    answer = json.loads(raw[:size])
    offset, found = size, {}
    for item in answer["outputs"]:
        count = int(item.get("parameters", {}).get("binary_data_size", 0))
        dtype = np.dtype(_NUMPY[item["datatype"]])
        if count:
            data = np.frombuffer(raw[offset:offset + count], dtype=dtype)
            offset += count
        else:
            data = np.asarray(item["data"], dtype=dtype)
        found[item["name"]] = data.reshape(item["shape"]).copy()
    return found


def get_json(base: str, path: str) -> Any:
    try:
        with urllib.request.urlopen(f"{base}{path}", timeout=TIMEOUT) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        raise StageError(f"Triton answered {error.code} to {path}") from error


def statistics(base: str) -> dict[str, dict[str, Any]]:
    """Every loaded model's inference statistics (cumulative), by model name."""
    data = get_json(base, "/v2/models/stats")
    return {m["name"]: m.get("inference_stats", {}) for m in data.get("model_stats", [])}
