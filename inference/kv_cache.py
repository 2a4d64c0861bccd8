"""KV prefix cache: recent sequences' KV tensors, reused for the longest common token prefix.

Consecutive keystrokes share almost the whole prompt, so a new request usually feeds only a few
new tokens. Two storage kinds, by graph:
- shared buffers (fused GQA graphs): one preallocated [1, kv_heads, capacity, head_dim] OrtValue
  per layer and K/V, bound as both past input and present output. Reuse is free (just a shorter
  valid length) and decoding never copies the cache.
- growing arrays (optimum graphs): the graph returns past+new as new arrays each step; reuse of a
  shorter prefix slices them once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort

from inference.graph import GraphSpec
from inference.kv_store import KVStore
from inference.tuning import (
    KEEP_KV_SLOTS,
    KV_CACHE_BYTES,
    KV_STORE_MIN_TOKENS,
    SHIFT_MIN_TOKENS,
    WAIT_FOR_TOKENS,
)


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    # numpy beats a Python loop on the 1-2k token prompts this runs on every keystroke
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if len(diff) else n


@dataclass(eq=False)
class KVSlot:
    """One cached sequence: the tokens whose KV is valid, and where that KV lives."""

    tokens: list[int] = field(default_factory=list)
    buffers: list[ort.OrtValue] | None = None  # shared-buffer mode
    arrays: list[np.ndarray] | None = None  # the buffers' memory, on the CPU (the KV store's view)
    past: list[np.ndarray] | None = None  # growing mode
    capacity: int = 0  # shared-buffer mode: most tokens the buffers hold
    leased: bool = False
    last_used: float = 0.0
    io_binding: object | None = None  # per-slot IOBinding, KV bound once
    decode_binding: object | None = None  # the one-token step's fixed-shape binding (runner.py)
    tail: Tail | None = None  # a moved span to put back once the middle is computed (shift_tail)
    compute_s: float = 0.0  # time its forward passes ran (not waiting for the session's lock)

    def __len__(self) -> int:
        return len(self.tokens)

    def truncate(self, n: int) -> None:
        """Keep the first n tokens' KV (the rest is overwritten or sliced off on the next pass)."""
        if n >= len(self.tokens):
            return
        del self.tokens[n:]
        if self.past is not None:
            self.past = [np.ascontiguousarray(p[:, :, :n, :]) for p in self.past]


@dataclass(frozen=True)
class PoolConfig:
    budget_bytes: int = KV_CACHE_BYTES
    capacity_tokens: int = 4096  # per slot, shared-buffer mode
    device: str = "cpu"
    # Reuse a cached tail that moved (a FIM prompt's suffix after a key typed before it), as
    # llama.cpp's --cache-reuse does: its keys re-rotated to the new positions.
    shift_tail: bool = False


@dataclass(frozen=True)
class Rope:
    """Rotary positions as the graphs apply them (rotate-half, not interleaved): a key cached
    at position m moves to m + delta by one more rotation of delta."""

    theta: float
    head_dim: int

    def shift(self, keys: np.ndarray, delta: int) -> np.ndarray:
        """`keys` [..., tokens, head_dim], rotated as if `delta` positions later."""
        half = self.head_dim // 2
        inv_freq = self.theta ** (-np.arange(0, half, dtype=np.float64) * 2 / self.head_dim)
        cos, sin = np.cos(delta * inv_freq), np.sin(delta * inv_freq)
        x1, x2 = keys[..., :half].astype(np.float64), keys[..., half:].astype(np.float64)
        out = np.concatenate((x1 * cos - x2 * sin, x2 * cos + x1 * sin), axis=-1)
        return out.astype(keys.dtype)


@dataclass(frozen=True)
class Tail:
    """A cached span to put back after the prompt's changed middle is computed: its tokens,
    where they go, and their KV (copied, keys re-rotated, before the middle overwrites it)."""

    start: int
    tokens: tuple[int, ...]
    kv: list[np.ndarray]  # per buffer, [kv_heads, tokens, head_dim]


def moved_tail(cached: list[int], prompt: list[int], shared: int, least: int) -> tuple[int, int]:
    """(where, in `cached`, the longest span that ends the prompt before its last token starts,
    its length), both ends past the first `shared` tokens; (0, 0) when none is `least` long.

    The span must end where `cached` held the prompt's last token (the FIM middle token): what
    the slot generated after it is not part of any prompt. The last token itself is fed anew,
    for its logits."""
    if len(prompt) - 1 - shared < least:
        return 0, 0
    last = prompt[-1]
    ends = [e for e in range(len(cached) - 1, shared + least - 1, -1) if cached[e] == last][:4]
    best = (0, 0)
    for end in ends:
        room = min(end, len(prompt) - 1) - shared
        a = np.asarray(cached[end - room : end][::-1])
        b = np.asarray(prompt[len(prompt) - 1 - room : len(prompt) - 1][::-1])
        diff = np.flatnonzero(a != b)
        n = int(diff[0]) if len(diff) else room
        if n >= least and n > best[1]:
            best = (end - n, n)
    return best


class KVPool:
    """Slots bounded by a byte budget; a lease picks the slot sharing the longest prefix."""

    def __init__(self, spec: GraphSpec, shared_buffers: bool, config: PoolConfig) -> None:
        self.spec = spec
        self.shared_buffers = shared_buffers
        self.config = config
        self.slots: list[KVSlot] = []
        self._lock = threading.Condition()
        self.store: KVStore | None = None  # prompts' KV on disk (CPU shared buffers only)
        self.rope: Rope | None = None  # set when cached spans may move (shift_tail, plain RoPE)

    @property
    def capacity_tokens(self) -> int:
        """The most tokens one slot holds: prompt and generated tokens together."""
        return self.config.capacity_tokens

    @property
    def slot_bytes(self) -> int:
        return self.config.capacity_tokens * self.spec.kv_bytes_per_token

    @property
    def max_slots(self) -> int:
        if not self.shared_buffers:
            return 64  # growing slots are bounded by bytes_used, not count
        return max(1, self.config.budget_bytes // self.slot_bytes)

    def bytes_used(self) -> int:
        if self.shared_buffers:
            return len(self.slots) * self.slot_bytes
        return sum(len(s) * self.spec.kv_bytes_per_token for s in self.slots)

    def cached_tokens(self, prompt: list[int]) -> int:
        """How many leading prompt tokens some slot, or the KV store, already holds (a peek:
        nothing is leased or read)."""
        with self._lock:
            held = max((common_prefix(s.tokens, prompt) for s in self.slots), default=0)
        if self.store is not None and len(prompt) - held >= KV_STORE_MIN_TOKENS:
            head = self.store.longest(prompt)
            held = max(held, head.tokens if head is not None else 0)
        return held

    def lease(self, prompt: list[int], wait_s: float = 1.0) -> tuple[KVSlot, int]:
        """A free slot and how many leading prompt tokens it already holds.

        When the slot with the most of this prompt is still held (typically by the request this
        one superseded, which stops within one step once cancelled), wait for it rather than
        recompute the prefix elsewhere: that recomputation is what makes typing feel slow.
        """
        deadline = time.monotonic() + wait_s
        with self._lock:
            while True:
                held = max(
                    (common_prefix(s.tokens, prompt) for s in self.slots if s.leased), default=0
                )
                free = [(common_prefix(s.tokens, prompt), s) for s in self.slots if not s.leased]
                # Longest shared prefix first; among equals, the least recently used is sacrificed.
                reused, best = max(
                    free, key=lambda pair: (pair[0], -pair[1].last_used), default=(0, None)
                )
                left = deadline - time.monotonic()
                if held > reused + WAIT_FOR_TOKENS and left > 0:
                    self._lock.wait(left)
                    continue
                break
            if best is not None and reused < self._worth_keeping(best):
                # Reusing a few tokens (a shared file header) would throw away a long cached
                # sequence another request is about to resume: take a new or the oldest slot.
                if len(self.slots) < min(self.max_slots, KEEP_KV_SLOTS):
                    best, reused = None, 0
                else:
                    oldest = min((s for s in self.slots if not s.leased), key=lambda s: s.last_used)
                    best, reused = oldest, common_prefix(oldest.tokens, prompt)
            if best is None and len(self.slots) < self.max_slots:
                best = self._new_slot()
            elif best is None:
                raise RuntimeError("every KV slot is in use: too many concurrent generations")
            # Never reuse the whole prompt: the last token must be fed to get logits.
            reused = min(reused, len(prompt) - 1)
            best.tail = self._tail(best, prompt, max(reused, 0))
            best.truncate(max(reused, 0))
            best.leased = True
            best.last_used = time.monotonic()
        return best, self._recall(best, prompt, max(reused, 0))

    def _tail(self, slot: KVSlot, prompt: list[int], reused: int) -> Tail | None:
        """The slot's cached tail that the prompt repeats after a changed middle, copied out
        before the middle is computed over it (None: nothing worth moving)."""
        if self.rope is None or slot.arrays is None:
            return None
        old, n = moved_tail(slot.tokens, prompt, reused, SHIFT_MIN_TOKENS)
        if n == 0:
            return None
        new = len(prompt) - 1 - n
        kv = []
        for i, array in enumerate(slot.arrays):
            span = array[0, :, old : old + n, :]
            kv.append(self.rope.shift(span, new - old) if i % 2 == 0 else span.copy())
        return Tail(new, tuple(prompt[new : new + n]), kv)

    def put_tail(self, slot: KVSlot) -> bool:
        """Put the slot's moved tail back, once the slot holds the prompt up to its start."""
        tail, slot.tail = slot.tail, None
        if tail is None or slot.arrays is None or len(slot) != tail.start:
            return False
        n = len(tail.tokens)
        for array, kv in zip(slot.arrays, tail.kv, strict=True):
            array[0, :, tail.start : tail.start + n, :] = kv
        slot.tokens.extend(tail.tokens)
        return True

    def _recall(self, slot: KVSlot, prompt: list[int], reused: int) -> int:
        """Fill the leased `slot` from the KV store when it holds more of `prompt` than the slot
        does by a margin worth a disk read; how many prompt tokens the slot holds then."""
        if self.store is None or slot.arrays is None or len(prompt) - reused < KV_STORE_MIN_TOKENS:
            return reused
        kv = self.store.load(prompt, more_than=reused + KV_STORE_MIN_TOKENS // 2)
        if kv is None:
            return reused
        n = min(kv.shape[2], len(prompt) - 1, slot.capacity)
        for i, array in enumerate(slot.arrays):
            array[0, :, :n, :] = kv[i, :, :n, :]
        slot.tokens = list(prompt[:n])
        slot.tail = None  # the slot holds another prompt's KV now
        return n

    def persist(self, slot: KVSlot) -> None:
        """Hand the leased `slot`'s prompt and its KV to the KV store (a copy, written on the
        store's own thread), unless the store already holds it."""
        n = len(slot)
        if self.store is None or slot.arrays is None or n < KV_STORE_MIN_TOKENS:
            return
        if self.store.holds(slot.tokens):
            return
        kv = np.stack([array[0, :, :n, :] for array in slot.arrays])
        self.store.save_later(list(slot.tokens), kv)

    @staticmethod
    def _worth_keeping(slot: KVSlot) -> int:
        """Reusing fewer of a slot's tokens than this destroys more than it saves."""
        return 1 if len(slot) < 4 * WAIT_FOR_TOKENS else len(slot) // 4

    def release(self, slot: KVSlot) -> None:
        with self._lock:
            slot.leased = False
            slot.tail = None
            slot.last_used = time.monotonic()
            self._evict_over_budget()
            self._lock.notify_all()

    def clear(self) -> None:
        with self._lock:
            self.slots = [s for s in self.slots if s.leased]

    def _new_slot(self) -> KVSlot:
        slot = KVSlot()
        if self.shared_buffers:
            shape = [1, self.spec.num_kv_heads, self.config.capacity_tokens, self.spec.head_dim]
            layers = range(2 * self.spec.num_layers)
            if self.config.device == "cpu":
                # ORT reads and writes these arrays' own memory (no copy), so the KV store can
                # save and restore a prompt's KV with plain numpy slices.
                slot.arrays = [np.zeros(shape, dtype=self.spec.kv_dtype) for _ in layers]
                slot.buffers = [ort.OrtValue.ortvalue_from_numpy(a, "cpu", 0) for a in slot.arrays]
            else:
                slot.buffers = [
                    ort.OrtValue.ortvalue_from_shape_and_type(
                        shape, self.spec.kv_dtype, self.config.device, 0
                    )
                    for _ in layers
                ]
            slot.capacity = self.config.capacity_tokens
        else:
            slot.past = self.spec.empty_past()
            slot.capacity = self.config.capacity_tokens
        self.slots.append(slot)
        return slot

    def _evict_over_budget(self) -> None:
        if self.shared_buffers:
            return  # the slot count is already bounded by the budget
        for slot in sorted(self.slots, key=lambda s: s.last_used):
            if self.bytes_used() <= self.config.budget_bytes:
                break
            if not slot.leased:
                self.slots.remove(slot)
