"""Custom operators: a recipe's `custom_ops:` made real in every stage that loads a model.

- `files`: the files the declarations name (in stage keys, carried to remote workers);
- `declared`: the declarations a stage was handed, and its process-wide activation;
- `onnx_schema`: registers each op's schema with `onnx.defs` (checker, shape inference);
- `export`: the legacy exporter's symbolics (custom node or decomposition);
- `ort`: ONNX Runtime sessions with the ops' kernels;
- `openvino`: convert_model extensions.

Nothing here is imported by `import edgebuild`; vendor modules load inside functions.
"""
