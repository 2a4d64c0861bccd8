"""onnxruntime-genai's graph with our edits (models/genai_build.py) against transformers, on tiny
random checkpoints of each family the catalogue serves.

Covers the engine's three ways of driving the graph: a whole prompt, plain past -> present
round trips (numpy in, numpy out), and one preallocated KV buffer bound through IOBinding as both
past and present.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")

from models.genai_build import (  # noqa: E402
    BUILDER_PYTHON_ENV,
    GraphBuildError,
    NBitsScheme,
    build_graph,
    builder_python,
    builder_versions,
)

pytestmark = pytest.mark.model  # each test runs the builder (seconds, in .venv-build)

VOCAB = 2048
MAX_LEN = 64  # shared KV buffer length
TOL = 1e-3
TINY: dict[str, Any] = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
    "attn_implementation": "eager",
}
# Variants beyond plain tied Llama: each exercises one optional path of the builder.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama_untied_biases": (
        "llama",
        {"tie_word_embeddings": False, "attention_bias": True, "mlp_bias": True},
    ),
    "llama3_rope": (
        "llama",
        {
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        },
    ),
    "qwen2": ("qwen2", {}),
    "mistral": ("mistral", {"sliding_window": None}),
}
# What the builder's graph gets wrong, refused before it runs (measured here against transformers:
# linear rope 0.007 off at 20 tokens, mistral's window of 6 0.39 off past it, and qwen2's windowed
# cache fails to run on a plain past).
UNSUPPORTED: dict[str, tuple[str, dict[str, Any], str]] = {
    "linear_rope": ("llama", {"rope_scaling": {"type": "linear", "factor": 2.0}}, "rope_scaling"),
    "mistral_sliding": ("mistral", {"sliding_window": 6}, "sliding-window"),
    "qwen2_sliding": (
        "qwen2",
        {"use_sliding_window": True, "sliding_window": 5, "max_window_layers": 1},
        "sliding-window",
    ),
}


class GraphRunner:
    """Drives a graph the way the inference engine does."""

    def __init__(self, path: Path, config: Any, kv_dtype: type = np.float32) -> None:
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.layers = config.num_hidden_layers
        self.kv_heads = config.num_key_value_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.kv_dtype = kv_dtype

    def empty_past(self) -> list[np.ndarray]:
        shape = (1, self.kv_heads, 0, self.head_dim)
        return [np.zeros(shape, self.kv_dtype) for _ in range(2 * self.layers)]

    def run_plain(
        self, ids: np.ndarray, past: list[np.ndarray], keep: int
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Numpy past in, (logits, present) out."""
        total = past[0].shape[2] + ids.shape[1]
        feeds = self._feeds(ids, total, keep)
        feeds.update(dict(zip(self._past_names(), past, strict=True)))
        logits, *present = self.session.run(["logits", *self._present_names()], feeds)
        return logits, present

    def make_buffers(self) -> list[Any]:
        shape = (1, self.kv_heads, MAX_LEN, self.head_dim)
        return [
            ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, self.kv_dtype))
            for _ in range(2 * self.layers)
        ]

    def run_shared(
        self, ids: np.ndarray, buffers: list[Any], past_len: int, keep: int
    ) -> np.ndarray:
        """One step with each layer's KV buffer bound as both past and present."""
        binding = self.session.io_binding()
        for name, value in self._feeds(ids, past_len + ids.shape[1], keep).items():
            binding.bind_cpu_input(name, value)
        binding.bind_output("logits")  # first, so it is get_outputs()[0]
        for past_name, present_name, buf in zip(
            self._past_names(), self._present_names(), buffers, strict=True
        ):
            binding.bind_ortvalue_input(past_name, buf)
            binding.bind_ortvalue_output(present_name, buf)
        self.session.run_with_iobinding(binding)
        return binding.get_outputs()[0].numpy()

    def _feeds(self, ids: np.ndarray, total: int, keep: int) -> dict[str, np.ndarray]:
        return {
            "input_ids": ids.astype(np.int64),
            "attention_mask": np.ones((1, total), np.int64),
            "num_logits_to_keep": np.array(keep, np.int64),
        }

    def _past_names(self) -> list[str]:
        return [f"past_key_values.{i}.{k}" for i in range(self.layers) for k in ("key", "value")]

    def _present_names(self) -> list[str]:
        return [f"present.{i}.{k}" for i in range(self.layers) for k in ("key", "value")]


def _make_checkpoint(root: Path, model_type: str, overrides: dict[str, Any]) -> tuple[Path, Any]:
    config = transformers.AutoConfig.for_model(model_type, **{**TINY, **overrides})
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    _randomise_biases(model)
    hf_dir = root / "hf"
    model.save_pretrained(hf_dir, safe_serialization=True)
    _save_tokenizer(hf_dir)
    return hf_dir, model


def _save_tokenizer(hf_dir: Path) -> None:
    """The builder copies the checkpoint's tokenizer beside its graph, so it must find one."""
    from tokenizers import Tokenizer, models

    vocab = {f"t{i}": i for i in range(VOCAB)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    transformers.PreTrainedTokenizerFast(tokenizer_object=backend).save_pretrained(hf_dir)


def _randomise_biases(model: Any) -> None:
    # HF initialises biases to zero, which would let a dropped bias go unnoticed.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.normal_(0.0, 0.1)


def _build(root: Path, model_type: str, overrides: dict[str, Any]) -> tuple[GraphRunner, Any]:
    hf_dir, model = _make_checkpoint(root, model_type, overrides)
    onnx_path = build_graph(hf_dir, root / "onnx", None, builder_python())
    return GraphRunner(onnx_path, model.config), model


def _torch_logits(model: Any, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(ids)).logits.numpy()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[GraphRunner, Any, Path]:
    root = tmp_path_factory.mktemp("tiny_llama")
    runner, model = _build(root, "llama", {})
    return runner, model, root


@pytest.fixture(scope="module")
def tokens() -> np.ndarray:
    return np.random.default_rng(1).integers(0, VOCAB, size=(1, 20), dtype=np.int64)


@pytest.fixture(scope="module")
def reference(tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray) -> np.ndarray:
    return _torch_logits(tiny[1], tokens)


def _decode_plain(runner: GraphRunner, ids: np.ndarray, prefill: int) -> np.ndarray:
    """Prefill, then one token per step feeding each present back as past; logits per position."""
    logits, past = runner.run_plain(ids[:, :prefill], runner.empty_past(), keep=1)
    steps = [logits[:, -1]]
    for t in range(prefill, ids.shape[1]):
        logits, past = runner.run_plain(ids[:, t : t + 1], past, keep=1)
        steps.append(logits[:, -1])
    return np.stack(steps, axis=1)


def _decode_shared(runner: GraphRunner, ids: np.ndarray, prefill: int) -> np.ndarray:
    buffers = runner.make_buffers()
    steps = [runner.run_shared(ids[:, :prefill], buffers, past_len=0, keep=1)[:, -1]]
    for t in range(prefill, ids.shape[1]):
        steps.append(runner.run_shared(ids[:, t : t + 1], buffers, past_len=t, keep=1)[:, -1])
    return np.stack(steps, axis=1)


def _assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, atol=TOL, rtol=0)


def test_full_prompt_matches_torch(
    tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    runner = tiny[0]
    logits, present = runner.run_plain(tokens, runner.empty_past(), keep=tokens.shape[1])
    _assert_close(logits, reference)
    assert present[0].shape == (1, runner.kv_heads, tokens.shape[1], runner.head_dim)


def test_keep_zero_returns_every_position(
    tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    # Mirrors HF's logits_to_keep=0; the engine never relies on it, but it must not crash.
    logits, _ = tiny[0].run_plain(tokens, tiny[0].empty_past(), keep=0)
    _assert_close(logits, reference)


def test_incremental_decode_matches_torch(
    tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    _assert_close(_decode_plain(tiny[0], tokens, prefill=15), reference[:, 14:])


def test_shared_buffer_decode_matches_plain(
    tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    shared = _decode_shared(tiny[0], tokens, prefill=15)
    _assert_close(shared, reference[:, 14:])
    np.testing.assert_allclose(
        shared, _decode_plain(tiny[0], tokens, prefill=15), atol=1e-5, rtol=0
    )


def test_shared_buffer_is_written_in_place(
    tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray
) -> None:
    # Proves GroupQueryAttention took the shared-buffer path instead of allocating a new present.
    runner = tiny[0]
    buffers = runner.make_buffers()
    runner.run_shared(tokens[:, :12], buffers, past_len=0, keep=1)
    key = buffers[0].numpy()
    assert key[:, :, :12].any(axis=-1).all()
    assert not key[:, :, 12:].any()
    _, present = runner.run_plain(tokens[:, :12], runner.empty_past(), keep=1)
    np.testing.assert_allclose(key[:, :, :12], present[0], atol=1e-6, rtol=0)


def test_chunk_after_past_matches_torch(
    tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    runner = tiny[0]
    ids = tokens[:, :14]
    _, past = runner.run_plain(ids[:, :10], runner.empty_past(), keep=1)
    logits, present = runner.run_plain(ids[:, 10:14], past, keep=4)
    _assert_close(logits, reference[:, 10:14])
    assert present[0].shape[2] == 14


def test_chunk_after_past_shared_buffer(
    tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    # Speculative verification: a k+1 token chunk written into the buffer after an existing past.
    runner = tiny[0]
    buffers = runner.make_buffers()
    runner.run_shared(tokens[:, :10], buffers, past_len=0, keep=1)
    logits = runner.run_shared(tokens[:, 10:14], buffers, past_len=10, keep=4)
    _assert_close(logits, reference[:, 10:14])
    # Rewriting positions 10.. (a rejected draft) must overwrite, not append.
    logits = runner.run_shared(tokens[:, 10:20], buffers, past_len=10, keep=10)
    _assert_close(logits, reference[:, 10:20])


def test_keep_larger_than_chunk_is_clamped(
    tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    logits, _ = tiny[0].run_plain(tokens[:, :3], tiny[0].empty_past(), keep=8)
    _assert_close(logits, reference[:, :3])


def test_graph_structure(tiny: tuple[GraphRunner, Any, Path]) -> None:
    onnx_path = tiny[2] / "onnx" / "model.onnx"
    # The builder's weights file beside our edited graph; its other files are not kept.
    assert sorted(p.name for p in onnx_path.parent.iterdir()) == ["model.onnx", "model.onnx.data"]
    assert not list(tiny[2].glob(".raw-*"))
    model = onnx.load(str(onnx_path))
    inits = {t.name: t for t in model.graph.initializer}
    matmuls = [n for n in model.graph.node if n.op_type == "MatMul"]
    assert len(matmuls) == 2 * 4 + 1  # qkv, o, gate_up, down per layer, then the LM head
    gqa = [n for n in model.graph.node if n.op_type == "GroupQueryAttention"]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in gqa[0].attribute}
    assert attrs["do_rotary"] == 1 and attrs["rotary_interleaved"] == 0
    assert attrs["num_heads"] == 4 and attrs["kv_num_heads"] == 2
    assert tuple(inits["cos_cache"].dims) == (512, 8)
    inputs = {i.name: i for i in model.graph.input}
    assert {"input_ids", "attention_mask", "num_logits_to_keep"} <= set(inputs)
    assert "position_ids" not in inputs  # GroupQueryAttention computes positions itself
    kv = [i for i in model.graph.input if i.name.startswith("past_key_values.")]
    assert {i.type.tensor_type.shape.dim[3].dim_value for i in kv} == {16}  # no symbolic dim
    assert "logits" in [o.name for o in model.graph.output]


def test_int8_graph_matches_fp32(
    tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    _, model, root = tiny
    out = build_graph(root / "hf", root / "q8", NBitsScheme(), builder_python())
    graph = onnx.load(str(out))
    nbits = [n for n in graph.graph.node if n.op_type == "MatMulNBits"]
    assert nbits and not [n for n in graph.graph.node if n.op_type == "MatMul"]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nbits[0].attribute}
    assert (attrs["bits"], attrs["block_size"], attrs["accuracy_level"]) == (8, 32, 4)
    q8 = GraphRunner(out, model.config)
    logits, _ = q8.run_plain(tokens, q8.empty_past(), keep=tokens.shape[1])
    assert np.abs(logits - reference).max() < 0.05
    shared = _decode_shared(q8, tokens, prefill=15)
    np.testing.assert_allclose(shared, logits[:, 14:], atol=1e-3, rtol=0)


def test_cuda_graph_is_fp16_with_fp32_logits(
    tiny: tuple[GraphRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    # The CUDA graph (a GPU machine's standard model) runs on the CPU provider too: so it is
    # built and validated on any machine, and tested here.
    _, model, root = tiny
    out = build_graph(root / "hf", root / "cuda", None, builder_python(), cuda=True)
    graph = onnx.load(str(out))
    kv = next(i for i in graph.graph.input if i.name == "past_key_values.0.key")
    assert kv.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    logits_type = next(o for o in graph.graph.output if o.name == "logits").type.tensor_type
    assert logits_type.elem_type == onnx.TensorProto.FLOAT  # the engine reads FP32 logits
    fp16 = GraphRunner(out, model.config, kv_dtype=np.float16)
    logits, _ = fp16.run_plain(tokens, fp16.empty_past(), keep=tokens.shape[1])
    assert logits.dtype == np.float32
    assert np.abs(logits - reference).max() < 0.01
    shared = _decode_shared(fp16, tokens, prefill=15)
    np.testing.assert_allclose(shared, logits[:, 14:], atol=0.01, rtol=0)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variants_match_torch(variant: str, tmp_path: Path, tokens: np.ndarray) -> None:
    model_type, overrides = VARIANTS[variant]
    runner, model = _build(tmp_path, model_type, overrides)
    reference = _torch_logits(model, tokens)
    logits, _ = runner.run_plain(tokens, runner.empty_past(), keep=tokens.shape[1])
    _assert_close(logits, reference)
    _assert_close(_decode_shared(runner, tokens, prefill=8), reference[:, 7:])


@pytest.mark.parametrize("variant", sorted(UNSUPPORTED))
def test_unsupported_configs_are_refused(variant: str, tmp_path: Path) -> None:
    model_type, overrides, message = UNSUPPORTED[variant]
    hf_dir, _ = _make_checkpoint(tmp_path, model_type, overrides)
    with pytest.raises(GraphBuildError, match=message):
        build_graph(hf_dir, tmp_path / "onnx", None, builder_python())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


def test_failed_build_leaves_no_files(tmp_path: Path) -> None:
    hf_dir, _ = _make_checkpoint(tmp_path, "llama", {})
    weights = hf_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # a truncated download
    with pytest.raises(GraphBuildError, match="builder failed"):
        build_graph(hf_dir, tmp_path / "onnx", None, builder_python())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


def test_missing_builder_environment_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BUILDER_PYTHON_ENV, str(tmp_path / "nowhere" / "python"))
    with pytest.raises(GraphBuildError, match="make install"):
        builder_python()


def test_builder_environment_has_the_pinned_versions() -> None:
    versions = builder_versions(builder_python())
    assert versions["builder:onnxruntime-genai"] == "0.18.0"
