"""Pow(x, 2) written as Mul(x, x) before the HTP sees it.

On the HTP (fp16, checked on the x86 emulator of onnxruntime-qnn 2.7.0) `Pow` with the
constant exponent 2 is wrong on some elements: Silero VAD's STFT magnitude
`sqrt(re² + im²)` had squares off by exactly 4 on 4 of 200 steps, the `Sqrt` of the
then negative sum returned 131008, and the speech probability fed by it moved by up to
0.65 (handed FP32's state), 0.86 streamed. `x · x` is the same value in every
precision and the HTP's Mul is exact there: with it, the same build's speech
probability is within 0.03 of FP32's (docs/recipes.md, "Voice activity").
"""

from __future__ import annotations

from pathlib import Path


def squares_as_products(source: Path, destination: Path) -> list[str]:
    """Write `source` with every Pow by a constant 2 as a Mul of its base by itself to
    `destination`, when there is one; the names of the nodes rewritten."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    constants.update({n.output[0]: n.attribute[0].t for n in graph.node
                      if n.op_type == "Constant" and n.attribute
                      and n.attribute[0].name == "value"})
    done = []
    for node in graph.node:
        if node.op_type != "Pow" or node.domain not in ("", "ai.onnx") or \
                node.input[1] not in constants:
            continue
        exponent = numpy_helper.to_array(constants[node.input[1]])
        if exponent.size != 1 or not np.all(exponent == 2):
            continue
        name = node.name or node.output[0]
        node.CopyFrom(helper.make_node("Mul", [node.input[0], node.input[0]],
                                       list(node.output), name=node.name))
        done.append(name)
    if done:
        onnx.save(model, str(destination))
    return done
