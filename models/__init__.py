"""Building models: GGUF/HF -> ONNX FP32 (standard) -> weight-only INT8 (fast), plus manifests.

Only `paths`, `manifest` and `registry` are imported at run time; the rest needs the `build` extra
(torch, transformers) and is imported lazily by the CLI.
"""
