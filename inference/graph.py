"""What a model graph expects: input names, KV layout, and how to feed one forward pass.

Two graph styles exist. "optimum": `position_ids` input, logits for every position, the graph
concatenates past and new KV (present = past + new). onnxruntime-genai's (models/genai_build.py):
GroupQueryAttention computes positions itself, `num_logits_to_keep` limits the LM head to the
last positions, and past/present can share one preallocated buffer. Feeding code is the same for
both, keyed on input names.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

_ORT_TO_NUMPY = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


@dataclass(frozen=True)
class LayerKV:
    past_key: str
    past_value: str
    present_key: str
    present_value: str


@dataclass(frozen=True)
class GraphSpec:
    layers: tuple[LayerKV, ...]
    num_kv_heads: int
    head_dim: int
    kv_dtype: type
    has_position_ids: bool
    has_num_logits: bool
    vocab_size: int

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def kv_bytes_per_token(self) -> int:
        itemsize = np.dtype(self.kv_dtype).itemsize
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * itemsize

    def empty_past(self, batch: int = 1) -> list[np.ndarray]:
        shape = (batch, self.num_kv_heads, 0, self.head_dim)
        return [np.zeros(shape, dtype=self.kv_dtype) for _ in range(2 * self.num_layers)]

    def feeds(
        self, ids: np.ndarray, past_len: int, past: list[np.ndarray], num_logits: int
    ) -> dict[str, np.ndarray]:
        """Inputs for one forward pass of `ids` (1-D) after `past_len` cached tokens."""
        n = len(ids)
        feeds: dict[str, np.ndarray] = {
            "input_ids": np.asarray(ids, dtype=np.int64).reshape(1, n),
            "attention_mask": np.ones((1, past_len + n), dtype=np.int64),
        }
        if self.has_position_ids:
            feeds["position_ids"] = np.arange(past_len, past_len + n, dtype=np.int64).reshape(1, n)
        if self.has_num_logits:
            feeds["num_logits_to_keep"] = np.array(num_logits, dtype=np.int64)
        for i, layer in enumerate(self.layers):
            feeds[layer.past_key] = past[2 * i]
            feeds[layer.past_value] = past[2 * i + 1]
        return feeds

    @property
    def output_names(self) -> list[str]:
        names = ["logits"]
        for layer in self.layers:
            names += [layer.present_key, layer.present_value]
        return names


def inspect_graph(session: ort.InferenceSession) -> GraphSpec:
    inputs = {i.name: i for i in session.get_inputs()}
    outputs = {o.name for o in session.get_outputs()}
    missing = {"input_ids", "attention_mask"} - inputs.keys()
    if missing or "logits" not in outputs:
        raise ValueError(f"not a causal-LM graph: missing {sorted(missing) or ['logits']}")
    layers = []
    while f"past_key_values.{len(layers)}.key" in inputs:
        i = len(layers)
        layers.append(
            LayerKV(
                f"past_key_values.{i}.key",
                f"past_key_values.{i}.value",
                f"present.{i}.key",
                f"present.{i}.value",
            )
        )
    if not layers:
        raise ValueError("graph has no past_key_values inputs: export it with past (KV cache)")
    logits_shape = next(o.shape for o in session.get_outputs() if o.name == "logits")
    vocab = logits_shape[-1]
    if not isinstance(vocab, int):
        raise ValueError(f"logits output needs a static vocab dim, got {logits_shape}")
    first = inputs[layers[0].past_key]
    heads, head_dim = first.shape[1], first.shape[3]
    if not isinstance(heads, int) or not isinstance(head_dim, int):
        raise ValueError(f"KV input {first.name} needs static head dims, got {first.shape}")
    return GraphSpec(
        layers=tuple(layers),
        num_kv_heads=heads,
        head_dim=head_dim,
        kv_dtype=_ORT_TO_NUMPY.get(first.type, np.float32),
        has_position_ids="position_ids" in inputs,
        has_num_logits="num_logits_to_keep" in inputs,
        vocab_size=vocab,
    )


def forward(
    session: ort.InferenceSession,
    spec: GraphSpec,
    ids: np.ndarray,
    past_len: int,
    past: list[np.ndarray],
    num_logits: int = 1,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """One plain (numpy in, numpy out) forward pass: logits [num_logits, vocab] and the new KV."""
    out = session.run(spec.output_names, spec.feeds(ids, past_len, past, num_logits))
    logits = out[0][0]
    return logits[-num_logits:], out[1:]
