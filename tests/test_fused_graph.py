"""The fused ONNX graph (models/fused_graph.py) against transformers on tiny random checkpoints.

Covers the engine's three ways of driving the graph: a whole prompt, plain past -> present
round trips (numpy in, numpy out), and one preallocated KV buffer bound through IOBinding as both
past and present.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")

from models.fused_graph import build_fused_graph  # noqa: E402

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
    "linear_rope": ("llama", {"rope_scaling": {"type": "linear", "factor": 2.0}}),
    "qwen2": ("qwen2", {}),
    "mistral_sliding": ("mistral", {"sliding_window": 6}),
    "qwen2_sliding": (
        "qwen2",
        {"use_sliding_window": True, "sliding_window": 5, "max_window_layers": 1},
    ),
}


class FusedRunner:
    """Drives a fused graph the way the inference engine does."""

    def __init__(self, path: Path, config: Any) -> None:
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.layers = config.num_hidden_layers
        self.kv_heads = config.num_key_value_heads
        self.head_dim = config.hidden_size // config.num_attention_heads

    def empty_past(self) -> list[np.ndarray]:
        shape = (1, self.kv_heads, 0, self.head_dim)
        return [np.zeros(shape, np.float32) for _ in range(2 * self.layers)]

    def run_plain(
        self, ids: np.ndarray, past: list[np.ndarray], keep: int
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Numpy past in, (logits, present) out."""
        total = past[0].shape[2] + ids.shape[1]
        feeds = self._feeds(ids, total, keep)
        feeds.update(dict(zip(self._past_names(), past, strict=True)))
        logits, *present = self.session.run(None, feeds)
        return logits, present

    def make_buffers(self) -> list[Any]:
        shape = (1, self.kv_heads, MAX_LEN, self.head_dim)
        return [
            ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, np.float32))
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
    return hf_dir, model


def _randomise_biases(model: Any) -> None:
    # HF initialises biases to zero, which would let a dropped bias go unnoticed.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.normal_(0.0, 0.1)


def _build(root: Path, model_type: str, overrides: dict[str, Any]) -> tuple[FusedRunner, Any]:
    hf_dir, model = _make_checkpoint(root, model_type, overrides)
    onnx_path = root / "onnx" / "model.onnx"
    build_fused_graph(hf_dir, onnx_path)
    return FusedRunner(onnx_path, model.config), model


def _torch_logits(model: Any, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(ids)).logits.numpy()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[FusedRunner, Any, Path]:
    root = tmp_path_factory.mktemp("tiny_llama")
    runner, model = _build(root, "llama", {})
    return runner, model, root


@pytest.fixture(scope="module")
def tokens() -> np.ndarray:
    return np.random.default_rng(1).integers(0, VOCAB, size=(1, 20), dtype=np.int64)


@pytest.fixture(scope="module")
def reference(tiny: tuple[FusedRunner, Any, Path], tokens: np.ndarray) -> np.ndarray:
    return _torch_logits(tiny[1], tokens)


def _decode_plain(runner: FusedRunner, ids: np.ndarray, prefill: int) -> np.ndarray:
    """Prefill, then one token per step feeding each present back as past; logits per position."""
    logits, past = runner.run_plain(ids[:, :prefill], runner.empty_past(), keep=1)
    steps = [logits[:, -1]]
    for t in range(prefill, ids.shape[1]):
        logits, past = runner.run_plain(ids[:, t : t + 1], past, keep=1)
        steps.append(logits[:, -1])
    return np.stack(steps, axis=1)


def _decode_shared(runner: FusedRunner, ids: np.ndarray, prefill: int) -> np.ndarray:
    buffers = runner.make_buffers()
    steps = [runner.run_shared(ids[:, :prefill], buffers, past_len=0, keep=1)[:, -1]]
    for t in range(prefill, ids.shape[1]):
        steps.append(runner.run_shared(ids[:, t : t + 1], buffers, past_len=t, keep=1)[:, -1])
    return np.stack(steps, axis=1)


def _assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, atol=TOL, rtol=0)


def test_full_prompt_matches_torch(
    tiny: tuple[FusedRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    runner = tiny[0]
    logits, present = runner.run_plain(tokens, runner.empty_past(), keep=tokens.shape[1])
    _assert_close(logits, reference)
    assert present[0].shape == (1, runner.kv_heads, tokens.shape[1], runner.head_dim)


def test_keep_zero_returns_every_position(
    tiny: tuple[FusedRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    # Mirrors HF's logits_to_keep=0; the engine never relies on it, but it must not crash.
    logits, _ = tiny[0].run_plain(tokens, tiny[0].empty_past(), keep=0)
    _assert_close(logits, reference)


def test_incremental_decode_matches_torch(
    tiny: tuple[FusedRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    _assert_close(_decode_plain(tiny[0], tokens, prefill=15), reference[:, 14:])


def test_shared_buffer_decode_matches_plain(
    tiny: tuple[FusedRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    shared = _decode_shared(tiny[0], tokens, prefill=15)
    _assert_close(shared, reference[:, 14:])
    np.testing.assert_allclose(
        shared, _decode_plain(tiny[0], tokens, prefill=15), atol=1e-5, rtol=0
    )


def test_shared_buffer_is_written_in_place(
    tiny: tuple[FusedRunner, Any, Path], tokens: np.ndarray
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
    tiny: tuple[FusedRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    runner = tiny[0]
    ids = tokens[:, :14]
    _, past = runner.run_plain(ids[:, :10], runner.empty_past(), keep=1)
    logits, present = runner.run_plain(ids[:, 10:14], past, keep=4)
    _assert_close(logits, reference[:, 10:14])
    assert present[0].shape[2] == 14


def test_chunk_after_past_shared_buffer(
    tiny: tuple[FusedRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
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
    tiny: tuple[FusedRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    logits, _ = tiny[0].run_plain(tokens[:, :3], tiny[0].empty_past(), keep=8)
    _assert_close(logits, reference[:, :3])


def test_graph_structure(tiny: tuple[FusedRunner, Any, Path]) -> None:
    onnx_path = tiny[2] / "onnx" / "model.onnx"
    assert sorted(p.name for p in onnx_path.parent.iterdir()) == ["model.onnx", "model.onnx.data"]
    model = onnx.load(str(onnx_path))
    # No onnx.checker: it does not know ORT's SimplifiedLayerNormalization in the default domain.
    inits = {t.name: t for t in model.graph.initializer}
    matmuls = [n for n in model.graph.node if n.op_type == "MatMul"]
    assert len(matmuls) == 2 * 4 + 1  # qkv, o, gate_up, down per layer, then the LM head
    for node in matmuls:
        assert node.input[1] in inits and len(inits[node.input[1]].dims) == 2, node.name
    gqa = [n for n in model.graph.node if n.op_type == "GroupQueryAttention"]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in gqa[0].attribute}
    assert attrs["do_rotary"] == 1 and attrs["rotary_interleaved"] == 0
    assert attrs["num_heads"] == 4 and attrs["kv_num_heads"] == 2
    assert attrs["scale"] == pytest.approx(1 / np.sqrt(16))
    assert tuple(inits["cos_cache"].dims) == (512, 8)
    inputs = [i.name for i in model.graph.input]
    assert inputs[:3] == ["input_ids", "attention_mask", "num_logits_to_keep"]
    assert [o.name for o in model.graph.output][:2] == ["logits", "present.0.key"]


def test_int8_quantized_graph_runs(
    tiny: tuple[FusedRunner, Any, Path], tokens: np.ndarray, reference: np.ndarray
) -> None:
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    _, model, root = tiny
    cfg = DefaultWeightOnlyQuantConfig(
        block_size=32,
        is_symmetric=True,
        accuracy_level=4,
        quant_format=QuantFormat.QOperator,
        bits=8,
    )
    quantizer = MatMulNBitsQuantizer(str(root / "onnx" / "model.onnx"), algo_config=cfg)
    quantizer.process()
    out = root / "q8" / "model.onnx"
    out.parent.mkdir()
    quantizer.model.save_model_to_file(str(out), use_external_data_format=True)
    assert not [n for n in onnx.load(str(out)).graph.node if n.op_type == "MatMul"]
    q8 = FusedRunner(out, model.config)
    logits, _ = q8.run_plain(tokens, q8.empty_past(), keep=tokens.shape[1])
    assert np.abs(logits - reference).max() < 0.05
    shared = _decode_shared(q8, tokens, prefill=15)
    np.testing.assert_allclose(shared, logits[:, 14:], atol=1e-3, rtol=0)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variants_match_torch(variant: str, tmp_path: Path, tokens: np.ndarray) -> None:
    model_type, overrides = VARIANTS[variant]
    runner, model = _build(tmp_path, model_type, overrides)
    reference = _torch_logits(model, tokens)
    logits, _ = runner.run_plain(tokens, runner.empty_past(), keep=tokens.shape[1])
    _assert_close(logits, reference)
    _assert_close(_decode_shared(runner, tokens, prefill=8), reference[:, 7:])


def _write_config(root: Path, **config: Any) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config))
    return root


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"model_type": "gpt2"}, "unsupported architecture"),
        (
            {**TINY, "model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
            "rope_scaling",
        ),
        ({**TINY, "model_type": "llama", "hidden_act": "gelu"}, "hidden_act"),
        ({**TINY, "model_type": "llama", "hidden_size": 32}, "head_dim"),
    ],
)
def test_rejects_unsupported_configs(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    hf_dir = _write_config(tmp_path / "hf", **config)
    with pytest.raises(ValueError, match=message):
        build_fused_graph(hf_dir, tmp_path / "out" / "model.onnx")


def test_max_positions_sizes_rotary_cache(tmp_path: Path, tokens: np.ndarray) -> None:
    hf_dir, model = _make_checkpoint(tmp_path, "llama", {})
    out = tmp_path / "onnx" / "model.onnx"
    build_fused_graph(hf_dir, out, max_positions=16)
    inits = {t.name: t for t in onnx.load(str(out), load_external_data=False).graph.initializer}
    assert tuple(inits["cos_cache"].dims) == (16, 8)
    runner = FusedRunner(out, model.config)
    runner.run_plain(tokens[:, :16], runner.empty_past(), keep=1)
    with pytest.raises(Exception, match="cos_cache"):  # ORT's own error type
        runner.run_plain(tokens, runner.empty_past(), keep=1)


def test_failed_build_leaves_no_files(tmp_path: Path) -> None:
    hf_dir, _ = _make_checkpoint(tmp_path, "llama", {})
    config = json.loads((hf_dir / "config.json").read_text())
    (hf_dir / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    out = tmp_path / "onnx" / "model.onnx"
    with pytest.raises(KeyError, match=r"model\.layers\.2"):
        build_fused_graph(hf_dir, out)
    assert not list(out.parent.iterdir())
