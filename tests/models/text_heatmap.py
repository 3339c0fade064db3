"""A text detector's heat map in miniature (issue 40, item 3): dark word strokes on white
pages in, a sigmoid map out that is positive (> 0.4) only around the words — under 5 % of
its pixels, as a CRAFT or DBNet map of a page is sparse.

Page `[1, 1, 64, 64]` (0 ink .. 1 paper) in, map `[1, 1, 64, 64]` out: ink = 1 − page,
blurred (3×3), ReLU, blurred again with a bias, ×8 through a sigmoid. Written with onnx's
helper, weights set: every build of it is the same model. `pages()` draws the pages.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SIZE = 64


def write_model(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    blur = np.full((1, 1, 3, 3), 1 / 9, np.float32)
    tensors = {"one": np.array(1.0, np.float32), "blur": blur,
               "blur2": blur * 8, "bias2": np.array([-3.2], np.float32)}
    nodes = [
        helper.make_node("Sub", ["one", "page"], ["ink"]),
        helper.make_node("Conv", ["ink", "blur"], ["spread"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["spread"], ["spread_pos"]),
        helper.make_node("Conv", ["spread_pos", "blur2", "bias2"], ["logit"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["logit"], ["map"]),
    ]
    graph = helper.make_graph(
        nodes, "text_heatmap",
        [helper.make_tensor_value_info("page", TensorProto.FLOAT, [1, 1, SIZE, SIZE])],
        [helper.make_tensor_value_info("map", TensorProto.FLOAT, [1, 1, SIZE, SIZE])],
        [numpy_helper.from_array(v, k) for k, v in tensors.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def pages(count: int, seed: int = 0, words: int = 3) -> np.ndarray:
    """White pages `[count, 1, 64, 64]`, each with `words` words: rows of dark 1-pixel
    strokes 5 pixels high, 8–14 wide, at random places (none: blank pages)."""
    rng = np.random.default_rng(seed)
    found = np.ones((count, 1, SIZE, SIZE), np.float32)
    for page in found:
        for _ in range(words):
            y, x, width = rng.integers(4, SIZE - 10), rng.integers(4, SIZE - 18), \
                rng.integers(8, 15)
            page[0, y:y + 5, x:x + width:2] = rng.uniform(0.0, 0.2)
    return found
