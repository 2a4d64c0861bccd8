"""The model graphs, from onnxruntime-genai's model builder, made ready for our engine.

The builder is the graph ONNX Runtime's own team keeps for each model family (GroupQueryAttention
with rotary inside, SkipSimplifiedLayerNormalization, packed QKV, fused gate/up, MatMulNBits). It
needs transformers 5 while the GGUF conversion (models/convert.py) runs on transformers 4, so it
runs as a subprocess in a build-only virtual environment (`make install` makes `.venv-build`).

Two edits make its graph the one the engine drives (inference/graph.py):
- a `num_logits_to_keep` input that slices the hidden states before the LM head: prefill projects
  only the rows asked for, and drafts and scoring can still ask for several (the builder offers
  all rows or, with `prune_lm_head`, only the last);
- numbers for the KV head dim, which the builder leaves symbolic.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from inference.paths import MODEL_FILE

BUILDER_PYTHON_ENV = "FASTCOMPLETE_BUILDER_PYTHON"
# What `make install` puts in .venv-build; the edits below depend on the builder's node names.
BUILDER_PINS = {
    "onnxruntime-genai": "0.18.0",
    "transformers": "5.25.0",
    "torch": "2.13.0",
    "onnx": "1.23.2",
    "onnx-ir": "1.1.0",
}
# fuse_mlp_gate_up: one MatMul for gate and up, as our old graph had (prefill 1024 measured 2.7 s
# with it, 3.3 s without, SmolLM2 int8). hf_token=false: nothing is asked of a model hub.
BUILDER_OPTIONS = ("fuse_mlp_gate_up=true", "hf_token=false")
LOG_TAIL_LINES = 15


class GraphBuildError(Exception):
    """The builder failed or is missing; the message says what to do."""


@dataclass(frozen=True)
class NBitsScheme:
    """Weight-only quantization. Measured here: 8-bit, block 32, symmetric keeps 97.5% top-1 agreement
    and bit-identical KV reuse; quantize_dynamic (activations too) dropped to 66% and broke reuse."""

    bits: int = 8
    block_size: int = 32
    symmetric: bool = True
    accuracy_level: int = 4  # int8 compute on CPU: the fast path

    def describe(self) -> dict[str, object]:
        return {"method": "MatMulNBits", **asdict(self)}

    def options(self) -> tuple[str, ...]:
        return (
            f"block_size={self.block_size}",
            f"is_symmetric={str(self.symmetric).lower()}",
            f"accuracy_level={self.accuracy_level}",
        )


def builder_python() -> Path:
    """The Python of the build-only environment: $FASTCOMPLETE_BUILDER_PYTHON, else `.venv-build`
    beside the environment running this (where `make install` puts it)."""
    named = os.environ.get(BUILDER_PYTHON_ENV)
    python = Path(named) if named else Path(sys.prefix).parent / ".venv-build" / "bin" / "python"
    if not python.is_file():
        raise GraphBuildError(
            f"the ONNX graph builder's environment is missing ({python}): run `make install`, or "
            f"set {BUILDER_PYTHON_ENV} to a Python with "
            + ", ".join(f"{p}=={v}" for p, v in BUILDER_PINS.items())
        )
    return python


def builder_versions(python: Path) -> dict[str, str]:
    """The builder environment's versions; a mismatch with the pins is an error, not a surprise."""
    script = (
        "import json, importlib.metadata as m;"
        f"print(json.dumps({{p: m.version(p) for p in {list(BUILDER_PINS)!r}}}))"
    )
    found = subprocess.run([python, "-c", script], capture_output=True, text=True)
    if found.returncode != 0:
        raise GraphBuildError(
            f"{python}: {found.stderr.strip().splitlines()[-1:]}: run `make install`"
        )
    versions = json.loads(found.stdout)
    wrong = {p: v for p, v in versions.items() if not v.startswith(BUILDER_PINS[p])}
    if wrong:
        raise GraphBuildError(
            f"{python} has {wrong}, the build needs {BUILDER_PINS}: run `make install`"
        )
    return {f"builder:{p}": v for p, v in versions.items()}


def unsupported(config: dict) -> str | None:
    """What in a checkpoint's config the builder's graph gets wrong (tests/test_genai_graph.py
    measured it against transformers): None when nothing. No catalogue model uses either."""
    rope = config.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in ("default", "llama3"):
        return f"rope_scaling {rope_type!r} (logits off by 0.007 from transformers' at 20 tokens)"
    window = config.get("sliding_window")
    if window and config.get("use_sliding_window", config.get("model_type") == "mistral"):
        return f"sliding-window attention ({window} tokens: wrong past the window)"
    return None


def build_graph(
    hf_dir: Path, out_dir: Path, scheme: NBitsScheme | None, python: Path, cuda: bool = False
) -> Path:
    """The builder's graph of `hf_dir` in `out_dir`, with our edits: weights of `scheme`, or FP32
    when it is None. `cuda`: the builder's CUDA graph, FP16 instead of FP32."""
    problem = unsupported(json.loads((hf_dir / "config.json").read_text()))
    if problem:
        raise GraphBuildError(f"{hf_dir}: not supported: {problem}")
    raw = out_dir.with_name(f".raw-{out_dir.name}")
    shutil.rmtree(raw, ignore_errors=True)
    try:
        _run_builder(hf_dir, raw, scheme, python, cuda)
        return _adapt(raw, out_dir)
    finally:
        shutil.rmtree(raw, ignore_errors=True)


def _run_builder(
    hf_dir: Path, raw: Path, scheme: NBitsScheme | None, python: Path, cuda: bool
) -> None:
    precision = f"int{scheme.bits}" if scheme else "fp16" if cuda else "fp32"
    options = (*BUILDER_OPTIONS, *(scheme.options() if scheme else ()))
    raw.mkdir(parents=True)
    cache = raw / "cache"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(cache),  # nothing is written to (or read from) the user's HF cache
    }
    command = [
        *(str(python), "-m", "onnxruntime_genai.models.builder"),
        *("-i", str(hf_dir), "-o", str(raw), "-p", precision, "-e", "cuda" if cuda else "cpu"),
        *("-c", str(cache)),
        *("--extra_options", *options),
    ]
    log = raw / "builder.log"
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0 or not (raw / MODEL_FILE).is_file():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:])
        raise GraphBuildError(f"the ONNX graph builder failed ({precision}):\n{tail}")


def _adapt(raw: Path, out_dir: Path) -> Path:
    """Our edits to the builder's graph; its weights stay in `model.onnx.data`, untouched: ORT
    maps them at load (SmolLM2's fast model loaded in 0.17 s and 269 MB, 0.47 s and 422 MB with
    the same weights inline)."""
    import onnx

    head_dim = json.loads((raw / "genai_config.json").read_text())["model"]["decoder"]["head_size"]
    model = onnx.load(str(raw / MODEL_FILE), load_external_data=False)
    keep_logits_input(model)
    static_head_dim(model, head_dim)
    float32_logits(model)
    out_dir.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(out_dir / MODEL_FILE))
    for data in raw.glob(f"{MODEL_FILE}.data*"):  # the name the graph refers to them by
        data.rename(out_dir / data.name)
    return out_dir / MODEL_FILE


def keep_logits_input(model) -> None:
    """Neg -> Reshape -> Slice(axis 1) in front of the LM head: logits of the last
    `num_logits_to_keep` positions (0 keeps every position)."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    head = next(n for n in graph.node if n.name.startswith("/lm_head/MatMul"))
    constants = {"/keep/shape": [1], "/keep/end": [np.iinfo(np.int64).max], "/keep/axes": [1]}
    graph.initializer.extend(
        numpy_helper.from_array(np.array(v, np.int64), k) for k, v in constants.items()
    )
    graph.input.append(helper.make_tensor_value_info("num_logits_to_keep", TensorProto.INT64, []))
    nodes = [
        helper.make_node("Neg", ["num_logits_to_keep"], ["/keep/neg"], "/keep/Neg"),
        helper.make_node("Reshape", ["/keep/neg", "/keep/shape"], ["/keep/start"], "/keep/Reshape"),
        helper.make_node(
            "Slice",
            [head.input[0], "/keep/start", "/keep/end", "/keep/axes"],
            ["/keep/kept"],
            "/keep/Slice",
        ),
    ]
    head.input[0] = "/keep/kept"
    logits = next(o for o in graph.output if o.name == "logits")
    logits.type.tensor_type.shape.dim[1].dim_param = "num_logits_to_keep"
    # Shapes recorded after the head still say 'sequence_length'.
    for info in [v for v in graph.value_info if v.name.startswith("/lm_head/")]:
        graph.value_info.remove(info)
    at = list(graph.node).index(head)  # the graph must stay topologically sorted
    ordered = [*graph.node[:at], *nodes, *graph.node[at:]]
    del graph.node[:]
    graph.node.extend(ordered)


def float32_logits(model) -> None:
    """FP16 graphs (CUDA) give FP16 logits; the engine reads FP32 (sampling, log-probs), and one
    cast of the kept rows costs nothing beside the LM head."""
    from onnx import TensorProto, helper

    logits = next(o for o in model.graph.output if o.name == "logits")
    if logits.type.tensor_type.elem_type != TensorProto.FLOAT16:
        return
    producer = next(n for n in model.graph.node if "logits" in n.output)
    producer.output[list(producer.output).index("logits")] = "/logits/fp16"
    model.graph.node.append(
        helper.make_node("Cast", ["/logits/fp16"], ["logits"], "/logits/Cast", to=TensorProto.FLOAT)
    )
    logits.type.tensor_type.elem_type = TensorProto.FLOAT


def static_head_dim(model, head_dim: int) -> None:
    for info in [*model.graph.input, *model.graph.output]:
        if info.name.startswith(("past_key_values.", "present.")):
            dim = info.type.tensor_type.shape.dim[3]
            dim.ClearField("dim_param")
            dim.dim_value = head_dim
