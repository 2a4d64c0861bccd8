"""The decode loop: prompt ids in, text pieces out, with stop rules, deadline and a cancel flag.

Shaped after gpt-fast: prefill (reusing the longest cached prefix), then one token per forward
pass, or several when prompt-lookup drafts verify. The cancel flag and the deadline are checked
before every forward pass, so a cancelled request stops within one decode step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from inference import lookup
from inference.healing import HORIZONTAL_SPACE
from inference.model import Model
from inference.names import boost, name_tokens
from inference.repetition import ends_in_loop
from inference.sampling import apply_allowed, greedy, sample
from inference.tuning import MAX_NEW_TOKENS, NAMES_BONUS_LOGITS, PREFILL_CHUNK_TOKENS


class Finish(str, Enum):
    EOS = "eos"
    STOP = "stop"
    NEWLINE = "newline"
    LENGTH = "length"
    DEADLINE = "deadline"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = MAX_NEW_TOKENS
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    seed: int = 0
    stop_strings: tuple[str, ...] = ()
    stop_at_newline: bool = False  # single-line completions
    next_line: bool = False  # with stop_at_newline: newlines before any text do not stop it
    stop_looping: bool = False  # stop when the text ends in a loop (inference.repetition)
    # A block: the answer ends before a later line indented less than this (the block being
    # written is left) or a markdown fence; None: no such rule.
    block_indent: int | None = None
    deadline_s: float | None = None  # wall-clock budget from the start of the request
    draft_tokens: int = 0  # prompt-lookup drafts per step (greedy only); 0 turns it off
    prefill_chunk: int = (
        PREFILL_CHUNK_TOKENS  # smaller for idle warm-ups, so a keystroke waits less
    )
    heal: bool = False  # back off a last token that ends inside a word (see inference/healing)
    persist: bool = False  # the prompt's KV goes to the model's KV store once it is prefilled
    constraint: str = ""  # text the output must start with; it is not part of the result
    # Start from the n-th most likely first token, then go on as configured: 0 is the usual
    # choice, 1 and 2 give the alternatives an explicit request shows (branching where the
    # candidates differ most, on the KV cache the first one left).
    first_choice: int = 0
    # What each known name still needs after the identifier at the cursor (inference/names.py):
    # tokens that keep to one get NAMES_BONUS_LOGITS while the identifier lasts.
    name_rests: tuple[str, ...] = ()
    # The bonus before the output has spelled any of a name (NAMES_BONUS_LOGITS after): less
    # for names offered where none is typed yet, so that they are a nudge, not a mask.
    names_first_bonus: float = NAMES_BONUS_LOGITS

    @property
    def cache_key(self) -> tuple:
        """Fields that change the output (the deadline does not, unless it fires)."""
        return (
            self.max_new_tokens,
            self.temperature,
            self.top_p,
            self.seed if self.temperature > 0 else 0,
            self.stop_strings,
            self.stop_at_newline,
            self.next_line,
            self.block_indent,
            self.stop_looping,
            self.constraint,
            self.first_choice,
            self.name_rests,
            self.names_first_bonus,
        )


@dataclass
class GenerationResult:
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    # Each chosen token's log-probability under the model's own logits (before any bonus): how
    # sure the model was, for the show-or-stay-quiet gate (lsp_server.inline.show_gate).
    logprobs: list[float] = field(default_factory=list)
    finish: Finish = Finish.LENGTH
    prompt_tokens: int = 0  # after trimming to the KV slot
    trimmed_tokens: int = 0  # cut from the prompt's start so that it fits the KV slot
    reused_tokens: int = 0
    prefill_s: float = 0.0  # forward passes feeding the uncached prompt (no lock waits)
    ttft_s: float | None = None  # request start -> first token chosen
    total_s: float = 0.0
    forward_passes: int = 0
    drafted: int = 0
    accepted: int = 0

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def tpot_s(self) -> float | None:
        """Mean time per output token after the first."""
        if self.ttft_s is None or self.new_tokens < 2:
            return None
        return (self.total_s - self.ttft_s) / (self.new_tokens - 1)


def fit_prompt(ids: list[int], model: Model, config: GenerationConfig) -> list[int]:
    """The prompt's end, trimmed so that it and the tokens asked for fit one KV slot.

    A prompt that fills the slot would otherwise end as "length" with nothing generated. The end
    is kept because it is what the continuation depends on; a leading BOS stays in front. The
    tokens asked for get at most half the slot: a request for more fills the slot and ends as
    "length" then, never before its first token.
    """
    capacity = model.pool.capacity_tokens
    limit = max(1, capacity - min(max(config.max_new_tokens, 0), capacity // 2) - 1)
    if len(ids) <= limit:
        return ids
    bos = model.tokenizer.bos_token_id
    if bos is not None and ids[0] == bos:
        return [bos, *ids[len(ids) - limit + 1 :]]
    return ids[len(ids) - limit :]


def logprob(logits: np.ndarray, token: int) -> float:
    """log softmax(logits)[token]."""
    top = float(logits.max())
    return float(logits[token]) - top - float(np.log(np.exp(logits - top).sum()))


class _Stop(Exception):
    def __init__(self, finish: Finish) -> None:
        self.finish = finish


class Generation:
    """Iterate to receive text pieces as they become final; `result` holds the rest."""

    def __init__(
        self,
        model: Model,
        prompt_ids: list[int],
        config: GenerationConfig = GenerationConfig(),
        cancel: threading.Event | None = None,
        pause: Callable[[], None] | None = None,
    ) -> None:
        if not prompt_ids:
            raise ValueError("empty prompt: nothing to continue from")
        if max(prompt_ids) >= model.spec.vocab_size or min(prompt_ids) < 0:
            raise ValueError("prompt has token ids outside the model's vocabulary")
        self.model = model
        self.prompt = fit_prompt(list(prompt_ids), model, config)
        self.config = config
        self.cancel = cancel or threading.Event()
        self.pause = pause  # blocks while higher-priority work runs (completions pre-empt explain)
        self.result = GenerationResult(
            prompt_tokens=len(self.prompt), trimmed_tokens=len(prompt_ids) - len(self.prompt)
        )
        self._rng = np.random.default_rng(config.seed)
        self._emitted = ""  # text already yielded
        self._holdback = max((len(s) for s in config.stop_strings), default=1) - 1
        self._start = 0.0
        self._k = config.draft_tokens  # adapted to how well drafts are doing in this generation
        # _naming's answer, by step: (step, token ids, bonus)
        self._named: tuple[int, np.ndarray | None, float] = (-1, None, 0.0)

    def __iter__(self) -> Iterator[str]:
        self._start = time.perf_counter()
        slot, reused = self.model.pool.lease(self.prompt)
        self.result.reused_tokens = reused
        try:
            yield from self._run(slot)
        finally:
            self.model.pool.release(slot)
            self.result.total_s = time.perf_counter() - self._start

    def run(self) -> GenerationResult:
        for _ in self:
            pass
        return self.result

    # -- the loop ---------------------------------------------------------------------------

    def _check(self) -> None:
        if self.pause is not None:
            self.pause()
        if self.cancel.is_set():
            raise _Stop(Finish.CANCELLED)
        deadline = self.config.deadline_s
        if deadline is not None and time.perf_counter() - self._start > deadline:
            raise _Stop(Finish.DEADLINE)

    def _forward(self, slot, ids: list[int], num_logits: int = 1) -> np.ndarray:
        self._check()
        if len(slot) + len(ids) > slot.capacity:
            raise _Stop(Finish.LENGTH)
        self.result.forward_passes += 1
        return self.model.runner.forward(slot, ids, num_logits)

    def _run(self, slot) -> Iterator[str]:
        computed_before = slot.compute_s
        try:
            chunk = max(1, self.config.prefill_chunk)
            # A cached tail that the prompt repeats after a changed middle (a FIM suffix after
            # a key) goes back in once the middle is computed (KVPool.shift_tail).
            until = slot.tail.start if slot.tail is not None else len(self.prompt)
            while len(slot) < len(self.prompt):
                if len(slot) >= until:
                    self.model.pool.put_tail(slot)
                    until = len(self.prompt)
                    continue
                end = min(len(slot) + chunk, until)
                logits = self._forward(slot, self.prompt[len(slot) : end])
            self.result.prefill_s = slot.compute_s - computed_before
            if self.config.persist:
                self.model.pool.persist(slot)
            if self.config.max_new_tokens <= 0:
                raise _Stop(Finish.LENGTH)
            row = logits[-1]
            token = self._choose(row)
            while True:
                yield from self._accept(token, row)
                drafts = self._drafts(slot.capacity - len(slot) - 1)
                base = len(slot)
                logits = self._forward(slot, [token, *drafts], 1 + len(drafts))
                kept = 0
                for i, guess in enumerate(drafts):
                    # Checked as the choice would be made: a draft is kept only where the
                    # names' bonus would have picked it too.
                    if greedy(self._steer(logits[i])) != guess:
                        break
                    kept += 1
                    yield from self._accept(guess, logits[i])
                self.result.drafted += len(drafts)
                self.result.accepted += kept
                self._adapt(len(drafts), kept)
                slot.truncate(base + 1 + kept)  # KV of rejected guesses is stale
                row = logits[kept]
                token = self._choose(row)
        except _Stop as stop:
            self.result.finish = stop.finish
        self.result.text = self._final_text()
        tail = self.result.text[len(self._emitted) :]
        if tail:
            self._emitted += tail
            yield tail

    def _remaining_constraint(self) -> str:
        if not self.config.constraint:
            return ""
        done = self.model.tokenizer.decode(self.result.token_ids)
        return self.config.constraint[len(done) :]

    def _naming(self) -> tuple[np.ndarray | None, float]:
        """The tokens that keep the output on a known name while it spells one (else None), and
        their bonus."""
        if not self.config.name_rests:
            return None, 0.0
        step = len(self.result.token_ids)
        if self._named[0] != step:
            done = self.model.tokenizer.decode(self.result.token_ids)
            index = self.model.tokenizer.vocab_index
            found = name_tokens(index, self.config.constraint, done, self.config.name_rests)
            begun = len(done) > len(self.config.constraint)
            bonus = NAMES_BONUS_LOGITS if begun else self.config.names_first_bonus
            self._named = (step, found, bonus)
        return self._named[1], self._named[2]

    def _steer(self, logits: np.ndarray) -> np.ndarray:
        """The logits as this step chooses from them: healing's constraint, the names' bonus."""
        remaining = self._remaining_constraint()
        if remaining:
            logits = apply_allowed(logits, self.model.tokenizer.vocab_index.allowed(remaining))
        named, bonus = self._naming()
        return logits if named is None else boost(logits, named, bonus)

    def _choose(self, logits: np.ndarray) -> int:
        cfg = self.config
        logits = self._steer(logits)
        if cfg.first_choice and not self.result.token_ids:
            ranked = np.argsort(-logits)[cfg.first_choice]
            if not np.isfinite(logits[ranked]):
                raise _Stop(Finish.EOS)  # fewer allowed first tokens than that
            return int(ranked)
        return sample(logits, cfg.temperature, cfg.top_p, self._rng)

    def _adapt(self, drafted: int, kept: int) -> None:
        """More drafts while they all verify, fewer when they miss (a miss costs a wider pass)."""
        if not drafted:
            return
        if kept == drafted:
            self._k = min(self._k + 2, 2 * self.config.draft_tokens)
        else:
            self._k = max(1, self._k - 1)

    def _drafts(self, slot_room: int) -> list[int]:
        """Guesses to verify beside the next token; `slot_room`: how many the KV slot still takes."""
        if self.config.draft_tokens <= 0 or self.config.temperature > 0:
            return []
        if self._remaining_constraint():
            return []  # drafts would bypass the constraint on the next tokens
        room = min(self.config.max_new_tokens - self.result.new_tokens - 1, slot_room)
        k = min(self._k, room)
        context = self.prompt + self.result.token_ids
        drafts = lookup.draft(context, k)
        if not drafts and self.model.runner.min_rows > 1 and room > 0:
            # The pass is two rows wide anyway: a weak one-token guess rides along for free.
            drafts = lookup.draft(context, 1, min_ngram=1)
        return drafts

    def _accept(self, token: int, logits: np.ndarray) -> Iterator[str]:
        """Record one chosen token (chosen from `logits`), apply the stop rules, and yield newly
        final text."""
        if self.result.ttft_s is None:
            self.result.ttft_s = time.perf_counter() - self._start
        if token in self.model.eos_ids:
            raise _Stop(Finish.EOS)
        self.result.token_ids.append(token)
        self.result.logprobs.append(logprob(logits, token))
        text = self._text()
        cut = self._cut(text)
        if cut is not None:
            raise _Stop(cut)
        if self.result.new_tokens >= self.config.max_new_tokens:
            raise _Stop(Finish.LENGTH)
        # Hold back a possible partial stop string and an unfinished UTF-8 sequence.
        safe = len(text) - self._holdback
        while safe > 0 and text[safe - 1] == "\ufffd":
            safe -= 1
        if safe > len(self._emitted):
            piece = text[len(self._emitted) : safe]
            self._emitted += piece
            yield piece

    def _line_end(self, text: str) -> int:
        """Where the line being written ends in `text` (-1: not yet)."""
        start = len(text) - len(text.lstrip()) if self.config.next_line else 0
        return text.find("\n", start)

    def _block_end(self, text: str) -> int:
        """Where the block being written ends in `text`: the line break before a later line
        that leaves its indentation or opens a markdown fence (-1: not yet, or no such rule)."""
        indent = self.config.block_indent
        if indent is None:
            return -1
        start = text.find("\n")
        while start >= 0:
            line = text[start + 1 :]
            code = line.lstrip(HORIZONTAL_SPACE)
            written = code[:1] not in ("", "\n")  # the line's first character is there
            if written and (len(line) - len(code) < indent or code.startswith("```")):
                return start
            start = text.find("\n", start + 1)
        return -1

    def _cut(self, text: str) -> Finish | None:
        if self.config.stop_at_newline and self._line_end(text) >= 0:
            return Finish.NEWLINE
        if self._block_end(text) >= 0:
            return Finish.STOP
        if any(s in text for s in self.config.stop_strings):
            return Finish.STOP
        if self.config.stop_looping and ends_in_loop(text):
            return Finish.STOP
        return None

    def _text(self) -> str:
        """Generated text after the constraint (which the caller already has)."""
        text = self.model.tokenizer.decode(self.result.token_ids)
        return text[len(self.config.constraint) :] if self.config.constraint else text

    def _final_text(self) -> str:
        text = self._text()
        cuts = [text.find(s) for s in self.config.stop_strings if s in text]
        if self.config.stop_at_newline and self._line_end(text) >= 0:
            cuts.append(self._line_end(text))
        if self._block_end(text) >= 0:
            cuts.append(self._block_end(text))
        return text[: min(cuts)] if cuts else text.rstrip("\ufffd")
