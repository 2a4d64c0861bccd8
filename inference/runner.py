"""Forward passes against a KV slot: feed new tokens, get logits for the last positions."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

from inference.errors import ModelFailure
from inference.graph import GraphSpec
from inference.kv_cache import KVSlot
from inference.session import cuda_graph_enabled, on_gpu
from inference.tuning import MEASURE_MIN_TOKENS, PREFILL_RATE_NEW_WEIGHT


@dataclass(eq=False)
class DecodeBinding:
    """A slot's one-token step with every input and output at a fixed address and shape, so that
    a CUDA graph captured once replays for every later step: the attention mask spans the whole
    KV buffer (ones for the valid tokens; GroupQueryAttention reads the length from it) and new
    values are written into the bound buffers in place."""

    rows: int  # tokens per step: Runner.min_rows
    io: ort.IOBinding
    input_ids: ort.OrtValue
    mask: ort.OrtValue
    mask_host: np.ndarray
    logits: ort.OrtValue
    run_options: ort.RunOptions


class Runner:
    """Owns one ORT session. Forward passes are serialised: one session, one compute stream."""

    def __init__(self, session: ort.InferenceSession, spec: GraphSpec) -> None:
        self.session = session
        self.spec = spec
        self.lock = threading.Lock()
        # 2 when a one-token pass computes differently from a wider one (see `calibrate`).
        self.min_rows = 1
        self.cuda_graph = cuda_graph_enabled(session)
        # Decode steps through a DecodeBinding: on CUDA with graphs (captured per slot). Set by
        # hand, it runs on the CPU too: the tests and bench/gpu_check.py check it computes what
        # the plain step does.
        self.fixed_decode = self.cuda_graph
        self.device = "cuda" if on_gpu(session) else "cpu"
        # A session that may capture graphs must be told not to for passes whose shapes change.
        self.dynamic_run = ort.RunOptions()
        if self.cuda_graph:
            self.dynamic_run.add_run_config_entry("gpu_graph_id", "-1")
        self._graph_ids = 0
        # Seconds a prompt token takes, from passes of MEASURE_MIN_TOKENS or more (prefill
        # chunks), averaged; None before one ran. Measured per pass, not per request, so that a
        # background prefill a request interrupts has already told the request's plan the day's
        # rate (a fresh server's first asks were planned on the default and timed out).
        self.prefill_s_per_token: float | None = None

    def calibrate(self, slot: KVSlot) -> None:
        """Check that one-token passes give the same numbers as multi-token passes.

        MatMulNBits with int8 compute takes a different kernel for a single row than for several
        (measured here: logits differ by up to 1.0), which would make output depend on how a prompt
        was split, breaking KV-reuse identity and speculative decoding. When that happens, every
        pass is made at least two rows wide by re-feeding the previous token (cheap with shared KV
        buffers: ~15% per step), and results no longer depend on the split.
        """
        probe = [11, 12, 13]
        whole = self.forward(slot, probe, 1)[-1]
        slot.truncate(0)
        self.forward(slot, probe[:2])
        single = self.forward(slot, probe[2:], 1)[-1]
        slot.truncate(0)
        if not np.array_equal(whole, single) and slot.buffers is not None:
            self.min_rows = 2

    def forward(self, slot: KVSlot, ids: list[int], num_logits: int = 1) -> np.ndarray:
        """Feed `ids` after the slot's tokens; logits [num_logits, vocab] for the last positions."""
        if len(ids) < self.min_rows and len(slot) > 0 and slot.buffers is not None:
            ids = [slot.tokens[-1], *ids]  # widen: recompute the last cached token as well
            slot.truncate(len(slot) - 1)
        if len(slot) + len(ids) > slot.capacity:
            raise ValueError(
                f"{len(slot) + len(ids)} tokens exceed the KV capacity of {slot.capacity}"
            )
        with self.lock:
            started = time.perf_counter()
            try:
                if (
                    slot.buffers is not None
                    and self.fixed_decode
                    and len(ids) == self.min_rows
                    and num_logits == 1
                ):
                    logits = self._forward_fixed(slot, ids)
                elif slot.buffers is not None:
                    logits = self._forward_shared(slot, ids, num_logits)
                else:
                    logits = self._forward_growing(slot, ids, num_logits)
            except Exception as exc:  # ORT's own error types: the model failed, not our code
                raise ModelFailure(f"forward pass failed ({type(exc).__name__}: {exc})") from exc
            elapsed = time.perf_counter() - started
            slot.compute_s += elapsed
        slot.tokens.extend(ids)
        if len(ids) >= MEASURE_MIN_TOKENS:
            self.measure_prefill(elapsed / len(ids))
        return logits

    def measure_prefill(self, s_per_token: float) -> None:
        old, w = self.prefill_s_per_token, PREFILL_RATE_NEW_WEIGHT
        self.prefill_s_per_token = s_per_token if old is None else (1 - w) * old + w * s_per_token

    def _forward_growing(self, slot: KVSlot, ids: list[int], num_logits: int) -> np.ndarray:
        assert slot.past is not None
        feeds = self.spec.feeds(np.asarray(ids), len(slot), slot.past, num_logits)
        out = self.session.run(self.spec.output_names, feeds, self.dynamic_run)
        slot.past = out[1:]
        return out[0][0, -num_logits:]

    def _bind_kv(self, slot: KVSlot) -> ort.IOBinding:
        assert slot.buffers is not None
        io = self.session.io_binding()
        for i, layer in enumerate(self.spec.layers):
            for j, (src, dst) in enumerate(
                ((layer.past_key, layer.present_key), (layer.past_value, layer.present_value))
            ):
                buf = slot.buffers[2 * i + j]
                io.bind_ortvalue_input(src, buf)
                io.bind_ortvalue_output(dst, buf)
        return io

    def _forward_shared(self, slot: KVSlot, ids: list[int], num_logits: int) -> np.ndarray:
        io = slot.io_binding
        if io is None:
            io = slot.io_binding = self._bind_kv(slot)
        past_len, n = len(slot), len(ids)
        io.bind_cpu_input("input_ids", np.asarray(ids, dtype=np.int64).reshape(1, n))
        io.bind_cpu_input("attention_mask", np.ones((1, past_len + n), dtype=np.int64))
        if self.spec.has_num_logits:
            io.bind_cpu_input("num_logits_to_keep", np.array(num_logits, dtype=np.int64))
        # Logits land in a numpy array we own: copy_outputs_to_cpu would copy every KV buffer too.
        logits = np.empty((1, num_logits, self.spec.vocab_size), dtype=np.float32)
        io.bind_output("logits", "cpu", 0, np.float32, list(logits.shape), logits.ctypes.data)
        self.session.run_with_iobinding(io, self.dynamic_run)
        return logits[0]

    def _forward_fixed(self, slot: KVSlot, ids: list[int]) -> np.ndarray:
        """One decode step (`min_rows` tokens wide) through the slot's DecodeBinding."""
        step = slot.decode_binding
        if not isinstance(step, DecodeBinding) or step.rows != len(ids):
            step = slot.decode_binding = self._decode_binding(slot, len(ids))
        step.input_ids.update_inplace(np.array([ids], dtype=np.int64))
        valid = len(slot) + len(ids)
        step.mask_host[0, :valid], step.mask_host[0, valid:] = 1, 0
        step.mask.update_inplace(step.mask_host)
        self.session.run_with_iobinding(step.io, step.run_options)
        return step.logits.numpy()[0].copy()  # on the CPU numpy() is a view of the buffer

    def _decode_binding(self, slot: KVSlot, rows: int) -> DecodeBinding:
        io = self._bind_kv(slot)
        device = self.device

        def fixed(shape: tuple[int, ...], dtype: type) -> ort.OrtValue:
            return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, device, 0)

        input_ids = fixed((1, rows), np.int64)
        mask = fixed((1, slot.capacity), np.int64)
        logits = fixed((1, 1, self.spec.vocab_size), np.float32)
        io.bind_ortvalue_input("input_ids", input_ids)
        io.bind_ortvalue_input("attention_mask", mask)
        if self.spec.has_num_logits:  # read by shape nodes on the CPU; always 1 here
            io.bind_cpu_input("num_logits_to_keep", np.array(1, dtype=np.int64))
        io.bind_ortvalue_output("logits", logits)
        run = ort.RunOptions()
        if self.cuda_graph:
            self._graph_ids += 1  # one captured graph per slot: its KV buffers' addresses
            run.add_run_config_entry("gpu_graph_id", str(self._graph_ids))
        mask_host = np.zeros((1, slot.capacity), dtype=np.int64)
        return DecodeBinding(rows, io, input_ids, mask, mask_host, logits, run)
