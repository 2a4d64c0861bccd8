"""HF Llama-family checkpoint -> FP32 ONNX graph built from ONNX Runtime's fused contrib operators.

The graph mirrors what the onnxruntime-genai model builder emits: GroupQueryAttention (rotary
applied inside the op, KV cache in BNSH layout, shared past/present buffers supported),
SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization for the RMSNorms, and packed QKV
and gate/up projections. Every projection (LM head included) is a plain MatMul whose B input is a
2-D FP32 initializer, so onnxruntime's MatMulNBitsQuantizer can later turn each into MatMulNBits.

Graph contract (the inference engine depends on these names, dtypes and shapes):

inputs
  input_ids                    int64   [batch, sequence_length]
  attention_mask               int64   [batch, total_sequence_length]     (past + new, all ones)
  num_logits_to_keep           int64   []                                 (0 keeps every position)
  past_key_values.{i}.key      float32 [batch, kv_heads, past_sequence_length, head_dim]
  past_key_values.{i}.value    float32 [batch, kv_heads, past_sequence_length, head_dim]
outputs
  logits                       float32 [batch, num_logits_to_keep, vocab]
  present.{i}.key              float32 [batch, kv_heads, present_sequence_length, head_dim]
  present.{i}.value            float32 [batch, kv_heads, present_sequence_length, head_dim]

present_sequence_length is max(total_sequence_length, past_sequence_length): past + new in the plain
mode, the buffer length when the same buffer is bound as past and present (GroupQueryAttention then
writes the new keys in place at positions total - new .. total - 1, overwriting whatever was there).
A num_logits_to_keep above sequence_length yields sequence_length positions. total_sequence_length
must not exceed max_positions, the rotary cache length chosen at build time.

Only numpy, onnx and safetensors are used here so that building needs no torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT_OPSET = 17
MS_DOMAIN = "com.microsoft"
MS_OPSET = 1
# IR 10 (onnx 1.16) is what onnxruntime-genai emits and what every recent ORT release loads.
IR_VERSION = 10
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3")
# Tensors at least this large go to the external data file; tiny ones (shape constants) stay inline
# so the .data file holds only weights and its size tracks the parameter count.
EXTERNAL_MIN_BYTES = 1024
# Aligning large tensors to the allocation granularity lets ORT memory-map them instead of copying.
EXTERNAL_ALIGN = 64 * 1024
EXTERNAL_ALIGN_MIN_BYTES = 1024 * 1024
# The packed gate/up MatMul halves the number of MatMulNBits dispatches in the MLP; at one token per
# step that dispatch overhead is measurable on two cores.
PACK_GATE_UP = True
INT64_MAX = np.iinfo(np.int64).max


@dataclass(frozen=True)
class ModelSpec:
    """The subset of a Hugging Face config.json the graph depends on, validated."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    max_positions: int
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    # Per layer: GroupQueryAttention's local_window_size (-1 means full causal attention).
    local_windows: tuple[int, ...]


@dataclass(frozen=True)
class _AttentionInputs:
    """Graph values every GroupQueryAttention node shares."""

    seqlens_k: str
    total_sequence_length: str
    cos_cache: str
    sin_cache: str


def build_fused_graph(hf_dir: Path, out_path: Path, *, max_positions: int | None = None) -> None:
    """Read config.json + model.safetensors (FP32) from hf_dir; write the FP32 fused graph.

    Weights always go to one external data file, '<out_path.name>.data' next to out_path, so the
    .onnx file stays small and the data file's size is predictable. max_positions sizes the rotary
    cos/sin caches (GroupQueryAttention rejects total lengths beyond them); it defaults to the
    config's max_position_embeddings.
    """
    hf_dir, out_path = Path(hf_dir), Path(out_path)
    config = json.loads((hf_dir / "config.json").read_text())
    spec = spec_from_config(config, max_positions=max_positions)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    data_path = out_path.with_name(out_path.name + ".data")
    try:
        with _WeightSource(hf_dir) as weights, data_path.open("wb") as data_file:
            builder = _GraphBuilder(data_file, data_path.name)
            _emit_model(builder, spec, weights)
            model = builder.make_model(f"{spec.model_type}_fused")
        onnx.save_model(model, out_path)
    except BaseException:
        # A half-written data file next to an older .onnx would pair stale offsets with new bytes.
        data_path.unlink(missing_ok=True)
        out_path.unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------- config validation


def spec_from_config(config: dict[str, Any], *, max_positions: int | None = None) -> ModelSpec:
    """Validate a config.json dict and reduce it to what the graph needs.

    Raises ValueError for architectures, activations, rotary schemes or shapes the fused graph
    cannot express; optional keys fall back to the transformers defaults.
    """
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"unsupported architecture {model_type!r}: the fused graph builder handles "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    act = config.get("hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"unsupported hidden_act {act!r}: only SiLU-gated MLPs are supported")
    rope_scaling = _rope_scaling(config)
    hidden = _required(config, "hidden_size")
    num_heads = _required(config, "num_attention_heads")
    num_kv_heads = int(config.get("num_key_value_heads") or num_heads)
    head_dim = int(config.get("head_dim") or hidden // num_heads)
    _check_attention_shape(num_heads, num_kv_heads, head_dim)
    num_layers = _required(config, "num_hidden_layers")
    qkv_bias, o_bias = _attention_biases(config, model_type)
    return ModelSpec(
        model_type=model_type,
        vocab_size=_required(config, "vocab_size"),
        hidden_size=hidden,
        intermediate_size=_required(config, "intermediate_size"),
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
        rope_theta=float(config.get("rope_theta", 10000.0)),
        rope_scaling=rope_scaling,
        max_positions=int(max_positions or _required(config, "max_position_embeddings")),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=qkv_bias,
        o_bias=o_bias,
        mlp_bias=bool(config.get("mlp_bias", False)),
        local_windows=_local_windows(config, model_type, num_layers),
    )


def _required(config: dict[str, Any], key: str) -> int:
    if config.get(key) is None:
        raise ValueError(f"config.json lacks {key!r}, which the fused graph needs")
    return int(config[key])


def _check_attention_shape(num_heads: int, num_kv_heads: int, head_dim: int) -> None:
    if num_heads % num_kv_heads:
        raise ValueError(
            f"num_attention_heads {num_heads} is not a multiple of kv heads {num_kv_heads}"
        )
    # GroupQueryAttention's rotary path requires it (and the cos/sin width, head_dim/2, to be % 8).
    if head_dim % 16:
        raise ValueError(
            f"head_dim {head_dim} unsupported: GroupQueryAttention rotary needs % 16 == 0"
        )


def _attention_biases(config: dict[str, Any], model_type: str) -> tuple[bool, bool]:
    """(q/k/v bias, o_proj bias): Qwen2 always has q/k/v biases; attention_bias adds all four."""
    if model_type == "qwen2":
        return True, False
    bias = bool(config.get("attention_bias", False))
    return bias, bias


def _rope_scaling(config: dict[str, Any]) -> dict[str, Any] | None:
    scaling = config.get("rope_scaling")
    if not scaling:
        return None
    rope_type = scaling.get("rope_type", scaling.get("type"))
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ValueError(
            f"unsupported rope_scaling type {rope_type!r}: the fused graph bakes a static cos/sin "
            f"cache and handles {', '.join(SUPPORTED_ROPE_TYPES)} (or rope_scaling null)"
        )
    return None if rope_type == "default" else {**scaling, "rope_type": rope_type}


def _local_windows(config: dict[str, Any], model_type: str, num_layers: int) -> tuple[int, ...]:
    """Per-layer GroupQueryAttention local_window_size matching HF's sliding-window mask.

    HF lets query q see keys in (q - window, q]; ORT 1.31's CPU kernel sees the same `window` keys
    for local_window_size = window (checked against transformers in tests/test_fused_graph.py).
    """
    full = (-1,) * num_layers
    window = config.get("sliding_window")
    if model_type == "llama" or window is None:
        return full
    if model_type == "mistral":
        return (int(window),) * num_layers
    if not config.get("use_sliding_window", False):  # qwen2 keeps sliding_window set but unused
        return full
    layer_types = config.get("layer_types")
    if layer_types is None:
        first_sliding = int(config.get("max_window_layers", num_layers))
        return tuple(int(window) if i >= first_sliding else -1 for i in range(num_layers))
    return tuple(int(window) if t == "sliding_attention" else -1 for t in layer_types)


# --------------------------------------------------------------------------- rotary caches


def rotary_caches(spec: ModelSpec) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin caches [max_positions, head_dim/2] in HF's non-interleaved (rotate_half) layout.

    HF pairs element i with i + head_dim/2, which is GroupQueryAttention's rotary_interleaved=0.
    The angle is formed in float32 like HF does, so positions far out round the same way.
    """
    inv_freq = _inv_freq(spec).astype(np.float32)
    positions = np.arange(spec.max_positions, dtype=np.float32)
    angles = np.outer(positions, inv_freq).astype(np.float32)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _inv_freq(spec: ModelSpec) -> np.ndarray:
    exponents = np.arange(0, spec.head_dim, 2, dtype=np.float64) / spec.head_dim
    inv_freq = 1.0 / (spec.rope_theta**exponents)
    scaling = spec.rope_scaling
    if scaling is None:
        return inv_freq
    if scaling["rope_type"] == "linear":
        return inv_freq / float(scaling["factor"])
    return _llama3_inv_freq(inv_freq, scaling)


def _llama3_inv_freq(inv_freq: np.ndarray, scaling: dict[str, Any]) -> np.ndarray:
    """Llama 3.1 scaling: long wavelengths slowed by `factor`, short ones kept, smooth between."""
    factor = float(scaling["factor"])
    low_freq_factor = float(scaling["low_freq_factor"])
    high_freq_factor = float(scaling["high_freq_factor"])
    old_context = float(scaling["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > old_context / low_freq_factor, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old_context / high_freq_factor) & (
        wavelen <= old_context / low_freq_factor
    )
    return np.where(medium, smoothed, scaled)


# --------------------------------------------------------------------------- weights


class _WeightSource:
    """Lazy FP32 tensor access over model.safetensors or a sharded checkpoint.

    Tensors are read one at a time so building never holds the whole checkpoint twice.
    """

    def __init__(self, hf_dir: Path) -> None:
        from safetensors import safe_open

        index = hf_dir / "model.safetensors.index.json"
        if index.exists():
            weight_map: dict[str, str] = json.loads(index.read_text())["weight_map"]
            files = sorted(set(weight_map.values()))
        else:
            files = ["model.safetensors"]
            weight_map = {}
        self._handles = {f: safe_open(str(hf_dir / f), framework="np") for f in files}
        if not weight_map:
            weight_map = {k: files[0] for k in self._handles[files[0]].keys()}  # noqa: SIM118
        self._where = weight_map

    def __enter__(self) -> _WeightSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handles.clear()

    def get(self, name: str) -> np.ndarray:
        if name not in self._where:
            raise KeyError(f"checkpoint has no tensor {name!r}")
        array = self._handles[self._where[name]].get_tensor(name)
        return np.ascontiguousarray(array, dtype=np.float32)

    def linear_t(self, *names: str) -> np.ndarray:
        """HF Linear weights [out, in] -> one [in, sum(out)] matrix, the MatMul B layout."""
        return np.ascontiguousarray(np.concatenate([self.get(n) for n in names], axis=0).T)

    def biases(self, *names: str) -> np.ndarray:
        return np.concatenate([self.get(n) for n in names])


# --------------------------------------------------------------------------- graph building


class _GraphBuilder:
    """Accumulates nodes and initializers; streams large initializers to the external data file."""

    def __init__(self, data_file: BinaryIO, data_location: str) -> None:
        self._data = data_file
        self._location = data_location
        self._offset = 0
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._const_count = 0

    def initializer(self, name: str, array: np.ndarray) -> str:
        array = np.ascontiguousarray(array)
        if array.nbytes < EXTERNAL_MIN_BYTES:
            self.initializers.append(numpy_helper.from_array(array, name))
        else:
            self.initializers.append(self._external_tensor(name, array))
        return name

    def const(self, values: Sequence[int] | int, dtype: type = np.int64) -> str:
        """A small inline constant (shape arithmetic); scalars stay rank 0."""
        self._const_count += 1
        return self.initializer(f"/const/{self._const_count}", np.array(values, dtype=dtype))

    def node(
        self,
        op: str,
        inputs: Sequence[str],
        name: str,
        *,
        outputs: int | Sequence[str] = 1,
        domain: str = "",
        **attrs: Any,
    ) -> list[str]:
        """Add a node named `name`; outputs are '<name>/output_<k>' unless given explicitly."""
        names = (
            [f"{name}/output_{k}" for k in range(outputs)] if isinstance(outputs, int) else outputs
        )
        self.nodes.append(
            helper.make_node(op, list(inputs), list(names), name, domain=domain, **attrs)
        )
        return list(names)

    def make_model(self, graph_name: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, graph_name, self.inputs, self.outputs, initializer=self.initializers
        )
        opsets = [helper.make_opsetid("", DEFAULT_OPSET), helper.make_opsetid(MS_DOMAIN, MS_OPSET)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="fastcomplete")
        model.ir_version = IR_VERSION
        return model

    def _external_tensor(self, name: str, array: np.ndarray) -> TensorProto:
        if array.nbytes >= EXTERNAL_ALIGN_MIN_BYTES and self._offset % EXTERNAL_ALIGN:
            pad = EXTERNAL_ALIGN - self._offset % EXTERNAL_ALIGN
            self._data.write(b"\0" * pad)
            self._offset += pad
        self._data.write(memoryview(array).cast("B"))
        tensor = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype))
        tensor.dims.extend(array.shape)
        tensor.data_location = TensorProto.EXTERNAL
        entries = {"location": self._location, "offset": self._offset, "length": array.nbytes}
        for key, value in entries.items():
            tensor.external_data.add(key=key, value=str(value))
        self._offset += array.nbytes
        return tensor


def _emit_model(b: _GraphBuilder, spec: ModelSpec, w: _WeightSource) -> None:
    _declare_io(b, spec)
    attn_inputs = _attention_inputs(b, spec)
    embed_table = w.get("model.embed_tokens.weight")
    embed = b.initializer("model.embed_tokens.weight", embed_table)
    (residual,) = b.node("Gather", [embed, "input_ids"], "/model/embed_tokens/Gather")
    normed = _first_norm(b, spec, w, residual)
    for i in range(spec.num_layers):
        normed, residual = _emit_layer(b, spec, w, i, normed, residual, attn_inputs)
    _emit_lm_head(b, spec, w, normed, embed_table)


def _first_norm(b: _GraphBuilder, spec: ModelSpec, w: _WeightSource, x: str) -> str:
    """Layer 0's input RMSNorm: the only one with no residual add to fuse in."""
    name = "model.layers.0.input_layernorm.weight"
    (normed,) = b.node(
        "SimplifiedLayerNormalization",
        [x, b.initializer(name, w.get(name))],
        "/model/layers.0/input_layernorm/SimplifiedLayerNorm",
        axis=-1,
        epsilon=spec.rms_norm_eps,
        stash_type=1,
    )
    return normed


def _declare_io(b: _GraphBuilder, spec: ModelSpec) -> None:
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    kv_shape = ["batch_size", spec.num_kv_heads, "past_sequence_length", spec.head_dim]
    present_shape = ["batch_size", spec.num_kv_heads, "present_sequence_length", spec.head_dim]
    b.inputs += [
        helper.make_tensor_value_info("input_ids", i64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info(
            "attention_mask", i64, ["batch_size", "total_sequence_length"]
        ),
        helper.make_tensor_value_info("num_logits_to_keep", i64, []),
    ]
    b.outputs.append(
        helper.make_tensor_value_info(
            "logits", f32, ["batch_size", "num_logits_to_keep", spec.vocab_size]
        )
    )
    for i in range(spec.num_layers):
        for kind in ("key", "value"):
            b.inputs.append(
                helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", f32, kv_shape)
            )
            b.outputs.append(
                helper.make_tensor_value_info(f"present.{i}.{kind}", f32, present_shape)
            )


def _attention_inputs(b: _GraphBuilder, spec: ModelSpec) -> _AttentionInputs:
    """GroupQueryAttention's seqlens_k (each row's last token index), total length and rotary caches.

    Both lengths come from attention_mask, whose width is past + new even when the KV buffer is
    longer, so that is what tells GroupQueryAttention where the new tokens go.
    """
    name = "/model/attn_mask_reformat"
    (total,) = b.node(
        "ReduceSum", ["attention_mask", b.const([1])], f"{name}/ReduceSum", keepdims=0
    )
    (last,) = b.node("Sub", [total, b.const(1)], f"{name}/Sub")
    (seqlens_k,) = b.node("Cast", [last], f"{name}/seqlens_k/Cast", to=TensorProto.INT32)
    (shape,) = b.node("Shape", ["attention_mask"], f"{name}/Shape")
    (length,) = b.node("Gather", [shape, b.const(1)], f"{name}/Gather", axis=0)
    (total_len,) = b.node("Cast", [length], f"{name}/total_seq_len/Cast", to=TensorProto.INT32)
    cos, sin = rotary_caches(spec)
    return _AttentionInputs(
        seqlens_k, total_len, b.initializer("cos_cache", cos), b.initializer("sin_cache", sin)
    )


def _emit_layer(
    b: _GraphBuilder,
    spec: ModelSpec,
    w: _WeightSource,
    i: int,
    normed: str,
    residual: str,
    attn_inputs: _AttentionInputs,
) -> tuple[str, str]:
    """One decoder layer: takes the normed input, returns the next norm's (output, residual).

    Each residual add is fused into the following RMSNorm, so a layer ends with the next layer's
    input_layernorm (or model.norm after the last layer).
    """
    prefix = f"model.layers.{i}"
    attn_out = _emit_attention(b, spec, w, i, normed, attn_inputs)
    normed, residual = _skip_norm(
        b, spec, attn_out, residual, w.get(f"{prefix}.post_attention_layernorm.weight"),
        f"{prefix}.post_attention_layernorm",
    )  # fmt: skip
    mlp_out = _emit_mlp(b, spec, w, i, normed)
    last = i == spec.num_layers - 1
    next_norm = "model.norm" if last else f"model.layers.{i + 1}.input_layernorm"
    return _skip_norm(b, spec, mlp_out, residual, w.get(f"{next_norm}.weight"), next_norm)


def _skip_norm(
    b: _GraphBuilder, spec: ModelSpec, x: str, residual: str, gamma: np.ndarray, weight_prefix: str
) -> tuple[str, str]:
    """residual + x, then RMSNorm; returns (normed, new residual) via the op's 4th output."""
    name = "/" + weight_prefix.replace("model.", "model/", 1) + "/SkipLayerNorm"
    normed, _mean, _inv_std, summed = b.node(
        "SkipSimplifiedLayerNormalization",
        [x, residual, b.initializer(f"{weight_prefix}.weight", gamma)],
        name,
        outputs=[f"{name}/output_0", "", "", f"{name}/output_3"],
        domain=MS_DOMAIN,
        epsilon=spec.rms_norm_eps,
    )
    return normed, summed


def _linear(
    b: _GraphBuilder, x: str, weight_t: np.ndarray, bias: np.ndarray | None, name: str
) -> str:
    """MatMul with a 2-D [in, out] initializer as B (the quantizer's pattern), + optional bias."""
    (y,) = b.node("MatMul", [x, b.initializer(f"{name}.weight", weight_t)], f"/{name}/MatMul")
    if bias is None:
        return y
    (y,) = b.node("Add", [y, b.initializer(f"{name}.bias", bias)], f"/{name}/Add")
    return y


def _emit_attention(
    b: _GraphBuilder,
    spec: ModelSpec,
    w: _WeightSource,
    i: int,
    x: str,
    attn_inputs: _AttentionInputs,
) -> str:
    attn = f"model.layers.{i}.self_attn"
    projections = [f"{attn}.{p}_proj" for p in ("q", "k", "v")]
    qkv_w = w.linear_t(*(f"{p}.weight" for p in projections))
    qkv_b = w.biases(*(f"{p}.bias" for p in projections)) if spec.qkv_bias else None
    # GQA's packed layout is [q heads | k heads | v heads] on the last axis, as concatenated here.
    qkv = _linear(b, x, qkv_w, qkv_b, f"{attn}.qkv_proj")
    name = f"/model/layers.{i}/attn/GroupQueryAttention"
    # Inputs 1 and 2 (key, value) stay empty: that is how GroupQueryAttention takes packed QKV.
    inputs = [qkv, "", "", f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
    inputs += [attn_inputs.seqlens_k, attn_inputs.total_sequence_length]
    inputs += [attn_inputs.cos_cache, attn_inputs.sin_cache]
    out, _, _ = b.node(
        "GroupQueryAttention",
        inputs,
        name,
        outputs=[f"{name}/output_0", f"present.{i}.key", f"present.{i}.value"],
        domain=MS_DOMAIN,
        num_heads=spec.num_heads,
        kv_num_heads=spec.num_kv_heads,
        scale=1.0 / math.sqrt(spec.head_dim),
        do_rotary=1,
        rotary_interleaved=0,
        local_window_size=spec.local_windows[i],
    )
    o_w = w.linear_t(f"{attn}.o_proj.weight")
    o_b = w.get(f"{attn}.o_proj.bias") if spec.o_bias else None
    return _linear(b, out, o_w, o_b, f"{attn}.o_proj")


def _emit_mlp(b: _GraphBuilder, spec: ModelSpec, w: _WeightSource, i: int, x: str) -> str:
    mlp = f"model.layers.{i}.mlp"
    gate, up = _gate_up(b, spec, w, mlp, x)
    # SiLU as x * Sigmoid(x): ORT's CPU optimizer fuses this pair; there is no SiLU op in opset 17.
    (sig,) = b.node("Sigmoid", [gate], f"/{mlp}/act_fn/Sigmoid")
    (act,) = b.node("Mul", [gate, sig], f"/{mlp}/act_fn/Mul")
    (h,) = b.node("Mul", [act, up], f"/{mlp}/Mul")
    down_b = w.get(f"{mlp}.down_proj.bias") if spec.mlp_bias else None
    return _linear(b, h, w.linear_t(f"{mlp}.down_proj.weight"), down_b, f"{mlp}.down_proj")


def _gate_up(
    b: _GraphBuilder, spec: ModelSpec, w: _WeightSource, mlp: str, x: str
) -> tuple[str, str]:
    names = (f"{mlp}.gate_proj", f"{mlp}.up_proj")
    biases = [w.get(f"{n}.bias") if spec.mlp_bias else None for n in names]
    if not PACK_GATE_UP:
        gate = _linear(b, x, w.linear_t(f"{names[0]}.weight"), biases[0], names[0])
        return gate, _linear(b, x, w.linear_t(f"{names[1]}.weight"), biases[1], names[1])
    packed_w = w.linear_t(*(f"{n}.weight" for n in names))
    packed_b = None if biases[0] is None else np.concatenate(biases)
    both = _linear(b, x, packed_w, packed_b, f"{mlp}.gate_up_proj")
    split = b.const([spec.intermediate_size, spec.intermediate_size])
    gate, up = b.node("Split", [both, split], f"/{mlp}/gate_up_proj/Split", outputs=2, axis=-1)
    return gate, up


def _emit_lm_head(
    b: _GraphBuilder, spec: ModelSpec, w: _WeightSource, normed: str, embed_table: np.ndarray
) -> None:
    """Keep the last num_logits_to_keep positions, then project onto the vocabulary.

    Slicing before the MatMul matters: the LM head is the largest projection, and prefill only
    needs the final position's logits.
    """
    (start,) = b.node("Neg", ["num_logits_to_keep"], "/model/logits_to_keep/Neg")
    # Slice wants 1-D starts; the input is declared rank 0.
    (starts,) = b.node("Reshape", [start, b.const([1])], "/model/logits_to_keep/Reshape")
    (kept,) = b.node(
        "Slice", [normed, starts, b.const([INT64_MAX]), b.const([1])], "/model/logits_to_keep/Slice"
    )
    # Tied models still get their own [hidden, vocab] copy: the Gather keeps the FP32 table while
    # the quantizer turns this MatMul into MatMulNBits.
    head = embed_table if spec.tie_word_embeddings else w.get("lm_head.weight")
    lm_head = b.initializer("lm_head.weight", np.ascontiguousarray(head.T))
    b.node("MatMul", [kept, lm_head], "/lm_head/MatMul", outputs=["logits"])
