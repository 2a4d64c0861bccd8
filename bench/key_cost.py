"""Where one key's time goes: the server's own inline path, stage by stage, in-process.

    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python bench/key_cost.py
        [--repo openai-agents-python] [--keys 60] [--max-tokens N] [--model NAME]
        [--seed 0] [--max-chars 300] [--json bench/results/key_cost.json]

No LSP server, no client, no concurrency: a region of 3-6 code lines of a real file of one of the
pinned repositories (bench/unseen_repos.py; `--repo`, default openai-agents-python, which the
server was tuned on; github-mcp-server is the one kept unseen) is typed one key at a time into an
open document, and after every key the path a request takes in the server runs to its end (never
cancelled by the next key: this is what one key costs when the person pauses after it). Regions
are bench/assist.py's (seeded; "\\n" and the next line's indentation are one key, auto-indent);
`--keys` keys are typed, over as many regions as that takes. The region's file is opened without
the region (the rest of the file below kept), the workspace index is built over a copy of the
repository without that file (so the region cannot reach the prompt through it), and before the
first key the whole prompt at the cursor is prefilled once (`engine.warm`, as the server's
didFocus prefill does while the file is open): the keys meet a warm KV cache, as they would.

The engine is the server's (fast model only, `completions_load_models=False`, the KV store in a
throwaway folder, no completion cache on disk, the in-memory one on), the settings the server's
defaults (`--max-tokens` sets maxTokens). The planner is built as `CompletionService` builds its
own (recent edits told of every edit, the telemetry's listener on the documents) over the
workspace index, as `eval_planner` does. Nothing in lsp_server/ or inference/ is changed: the
finer timings come from wrappers put around their functions for the run (`Probe`), and from a
subclass of the decode loop (`TimedGeneration`) that timestamps each forward pass and each token.

Stages, each timed with time.perf_counter per key (median and p95 over the keys, and the stage's
share of the sum of all keys' totals):
- edit applied: `Documents.change` with the key as a TextDocumentContentChangePartial, as the
  server applies didChange (its listeners included: recent edits, telemetry).
- snapshot + parse: `snapshot_of` (the incremental tree-sitter parse) and `Planner.cursor_view`.
- request: `Planner.request(cold_ok=True)`: the repository's snippets (chosen once per block of
  lines, so mostly a cache hit), recent edits, the names the index defines.
- plan: `plan_at`: the context builder, the name hints, the FIM form, and tokenization (the
  budget's token counts and the prompt's encode: "tokenizer" below is every
  `Tokenizer.encode` call made while planning, and how many).
- engine, before the loop: `Engine.generate`'s wall time outside the decode loop (routing,
  token healing, the completion cache's key and lookup).
- engine, prefill: the forward passes over the prompt's uncached tokens (the previous key left
  its prompt in the KV cache; `tokens computed` is what this key's prompt did not share with it).
- engine, to first token: from the loop's start to the first token chosen, less the prefill's
  passes (the KV slot's lease, the first choice with healing's constraint and the names' bonus).
- engine, decode: from the first token to the end (each decoded token; `ms per decoded token` is
  GenerationResult.tpot_s, i.e. (total - ttft) / (tokens - 1), over answers of 2+ tokens; `decode
  pass` is one forward pass after the first token, which may verify prompt-lookup drafts; `outside
  passes` is the decode time not spent in forward passes: choosing, logprobs, stop rules, text).
- post + syntax: `run_completion`'s wall time less the engine's: post-processing (the `post`
  row) and the syntax check (`syntax`: one incremental parse of the document with the answer in it,
  and both trees' error counts).
- show gate: `ShowGate.observe` (what became of earlier suggestions, every request) and, when an
  answer came, `features` + `ShowGate.probability` + `put`, as `Showing` does.
- total: the sum of the stages. The server's debounce (the debounceMs setting) comes before all of
  it; it is printed as a constant line, not added. `> 130 ms` / `> 300 ms`: keys whose total is
  over a key's gap at ~130 ms a key, and over the 300 ms a suggestion at a pause should take.

What the next key would have made reusable: after key k the answer shown was A; the person's next
key was n. `next key = answer's start`: A starts with n (the in-flight generation had it right:
typing through it would answer key k+1 without a model run; where key k's total was over 130 ms,
the server cancelled that generation at key k+1 and computed k+1 from scratch; `keys it covers`:
how many of the following keys A spells exactly). `KV into the answer`: key k+1's prompt reused
KV beyond key k's prompt, i.e. some of key k's decoded tokens (a FIM prompt puts the typed key
before its suffix and middle marker, so it is expected to be never).

Prints the table and writes every key's numbers to bench/results/key_cost.json. Two cores: run
it on a quiet machine; one key at a time, so what it measures is the work, not the queueing.
"""

from __future__ import annotations

import os
import sys

# Run as a script (`python bench/NAME.py`), the repository root comes first, as under `python -m`.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import dataclasses
import functools
import itertools
import json
import shutil
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lsprotocol import types

import inference.engine as engine_module
import lsp_server.completion.plan as plan_module
import lsp_server.completion.planner as planner_module
import lsp_server.completion.run as run_module
from bench import assist
from bench.unseen_repos import BY_NAME, checked_out, held_out_copy, repo_dir
from inference.engine import Engine, EngineConfig
from inference.generate import Generation
from inference.kv_cache import PoolConfig
from inference.metrics import percentile
from inference.router import FAST
from lsp_server.cli.evaluation import LoadedModels, LoadedWorkspace
from lsp_server.completion.plan import Cursor, plan_at
from lsp_server.completion.planner import Planner
from lsp_server.config.settings import Settings
from lsp_server.inline.show_gate import Put, ShowGate, features, rest_logprobs
from lsp_server.serving.notices import Notices
from lsp_server.telemetry.counts import Telemetry
from lsp_server.text.documents import Documents, snapshot_of
from lsp_server.text.positions import position_at
from lsp_server.workspace.exclusions import Exclusions
from lsp_server.workspace.index import WorkspaceIndex
from lsp_server.workspace.recent_edits import RecentEdits

RESULTS = Path(__file__).resolve().parent / "results"
KEY_GAP_MS = 130.0  # the simulated typist's gap between keys (bench/assist.py: median ~135 ms)
PAUSE_BUDGET_MS = 300.0  # at a pause, the suggestion within this (issue 49, item 5)
STAGES = (
    ("edit", "edit applied (didChange)"),
    ("snapshot", "snapshot + incremental parse"),
    ("request", "request: snippets, edits, names"),
    ("plan", "plan: context + tokenization"),
    ("engine_before", "engine, before the loop"),
    ("prefill", "engine, prefill (uncached)"),
    ("first_token", "engine, to first token (less prefill)"),
    ("decode", "engine, decode"),
    ("post", "post-processing + syntax check"),
    ("gate", "show gate"),
)
# Finer timings inside the stages (not added to the total: they are parts of the rows above).
PARTS = (
    ("request.snippets", "  request: snippets.choose"),
    ("request.recent", "  request: recent edits"),
    ("request.names", "  request: index_names"),
    ("plan.context", "  plan: build_context"),
    ("plan.names", "  plan: name hints"),
    ("plan.tokenizer", "  plan: Tokenizer.encode (all calls)"),
    ("decode.passes", "  decode: forward passes"),
    ("decode.outside", "  decode: outside passes"),
    ("post.postprocess", "  post: postprocess_report"),
    ("post.syntax", "  post: adds_syntax_errors"),
)


# -- observing without changing ------------------------------------------------------------------


class Probe:
    """Seconds and calls per name, for the key being measured (reset per key)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started
                self.calls[name] += 1

        return timed

    def patch(self, owner: Any, attr: str, name: str) -> None:
        """Time `owner.attr` as `name`; a function renamed since this was written is left
        alone (its part reads 0) and named on stderr."""
        fn = getattr(owner, attr, None)
        if fn is None:
            print(f"key_cost: {attr} not found: part {name!r} not measured", file=sys.stderr)
            return
        setattr(owner, attr, self.wrap(name, fn))


class TimedGeneration(Generation):
    """The decode loop as it is, with each forward pass timed (before or after the first token)
    and each token's time since the loop started. Every one made is kept in `made`."""

    made: ClassVar[list[TimedGeneration]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.passes: list[tuple[str, int, float]] = []  # (prefill|decode, rows, seconds)
        self.token_s: list[float] = []  # since the loop's start, per token chosen (EOS included)
        TimedGeneration.made.append(self)

    def _forward(self, slot, ids, num_logits=1):  # type: ignore[no-untyped-def]
        phase = "decode" if self.token_s else "prefill"
        started = time.perf_counter()
        try:
            return super()._forward(slot, ids, num_logits)
        finally:
            self.passes.append((phase, len(ids), time.perf_counter() - started))

    def _accept(self, token, logits) -> Iterator[str]:  # type: ignore[no-untyped-def]
        self.token_s.append(time.perf_counter() - self._start)
        yield from super()._accept(token, logits)


# -- the per-key record ----------------------------------------------------------------------------


@dataclass
class Key:
    region: int
    index: int  # the key's number within its region
    typed: str  # the key's text
    next_key: str  # the key after it ("" at the region's end)
    rest: str  # the region's text after this key
    ms: dict[str, float] = field(default_factory=dict)  # per stage
    parts_ms: dict[str, float] = field(default_factory=dict)
    tokenizer_calls: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0
    computed_tokens: int = 0
    new_tokens: int = 0
    finish: str = ""
    decode_passes: int = 0
    drafted: int = 0
    accepted: int = 0
    tpot_ms: float | None = None
    token_gaps_ms: list[float] = field(default_factory=list)
    generations: int = 0
    single_line: bool = True
    short_plan: bool = False  # planned short (cold prompt) with the whole plan deferred
    raw: str = ""  # the engine's text
    answer: str = ""  # what would be shown ("" for nothing)
    empty_reason: str | None = None
    gate_p: float | None = None
    gate_held: bool = False

    @property
    def total_ms(self) -> float:
        return sum(self.ms.values())


def _stats(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return round(statistics.median(values), 1), round(percentile(values, 0.95), 1)


# -- the run ---------------------------------------------------------------------------------------


class KeyCost:
    def __init__(self, engine: Engine, settings: Settings, index: WorkspaceIndex, probe: Probe):
        self.engine = engine
        self.settings = settings
        self.probe = probe
        self.documents = Documents()
        current = lambda: settings  # noqa: E731
        recent = RecentEdits(lambda uri: d.text if (d := self.documents.get(uri)) else None)
        self.documents.on_edit.append(recent.edited)
        telemetry = Telemetry(self.documents, current, lambda coro: coro.close())
        self.planner = Planner(
            settings=current,
            models=LoadedModels(engine),
            workspace=LoadedWorkspace(index, index.exclusions),
            edits=recent,
            notices=Notices(),
            telemetry=telemetry,
        )
        self.gate = ShowGate()  # the seed weights: a workspace without labels yet
        probe.patch(self.planner.snippets, "choose", "request.snippets")
        probe.patch(recent, "recent", "request.recent")

    def open(self, uri: str, text: str, language: str, offset: int) -> float:
        """Open the document and prefill its prompt at `offset` (as the server's didFocus
        prefill does while the file is open); seconds."""
        self.documents.open(uri, text, 1, language)
        snap = snapshot_of(self.documents, uri)
        view = self.planner.cursor_view(snap, *position_at(snap.text, offset))
        started = time.perf_counter()
        plan = self.planner.plan(snap, view)
        if plan.serving is not None and plan.prompt.strip():
            self.engine.warm(
                plan.serving, plan.prompt, plan.tokens, threading.Event(), plan.config.heal
            )
        return time.perf_counter() - started

    def region(self, number: int, region: assist.Region, uri: str, keys: int) -> list[Key]:
        text = region.before + region.after
        open_s = self.open(uri, text, region.language, len(region.before))
        print(
            f"region {number}: {region.path}:{region.line + 1}, prompt warmed in {open_s:.2f} s",
            file=sys.stderr,
        )
        steps: list[str] = []
        done = 0
        while done < len(region.typed):
            line_so_far = (region.before + region.typed[:done]).rsplit("\n", 1)[-1]
            steps.append(assist.next_key(region.typed[done:], line_so_far))
            done += len(steps[-1])
        out: list[Key] = []
        offset, version, typed = len(region.before), 1, 0
        for i, key_text in enumerate(steps[:keys]):
            typed += len(key_text)
            key = Key(
                number,
                i,
                key_text,
                steps[i + 1] if i + 1 < len(steps) else "",
                region.typed[typed:],
            )
            version += 1
            self.one_key(uri, version, offset, key)
            offset += len(key_text)
            out.append(key)
        return out

    def one_key(self, uri: str, version: int, offset: int, key: Key) -> None:
        probe, engine, settings = self.probe, self.engine, self.settings
        probe.reset()
        TimedGeneration.made.clear()
        ms = key.ms
        doc = self.documents.get(uri)
        assert doc is not None
        # 1. the edit, as didChange applies it; then the snapshot's incremental parse
        at = types.Position(*position_at(doc.text, offset))
        change = types.TextDocumentContentChangePartial(range=types.Range(at, at), text=key.typed)
        t0 = time.perf_counter()
        self.documents.change(uri, version, [change])
        t1 = time.perf_counter()
        snap = snapshot_of(self.documents, uri)
        line, character = position_at(snap.text, offset + len(key.typed))
        view = self.planner.cursor_view(snap, line, character)
        t2 = time.perf_counter()
        # 2. the request (Planner.plan_and_run's first half, as ModelOnPrompt asks it)
        request = self.planner.request(snap, view, cold_ok=True)
        t3 = time.perf_counter()
        # 3. the plan
        tokenizer_before = (
            probe.seconds.get("plan.tokenizer", 0.0),
            probe.calls.get("plan.tokenizer", 0),
        )
        cursor = Cursor(view.text, view.line, view.character, snap.language_id, snap.uri, view.tree)
        plan = plan_at(engine, cursor, settings, request)
        t4 = time.perf_counter()
        key.tokenizer_calls = probe.calls.get("plan.tokenizer", 0) - tokenizer_before[1]
        key.parts_ms["plan.tokenizer"] = 1000 * (
            probe.seconds.get("plan.tokenizer", 0.0) - tokenizer_before[0]
        )
        # 4 + 5. the run: engine, post-processing and the syntax check
        done = self.planner.run(plan, snap, view, threading.Event())
        t5 = time.perf_counter()
        # 6. the show gate, as Showing does for a model's answer
        self.gate.observe(uri, snap.text)
        if done.text and settings.showGate:
            text = snap.text
            line_start = text.rfind("\n", 0, plan.offset) + 1
            line_end = text.find("\n", plan.offset)
            logprobs = done.result.logprobs if done.result else ()
            x = features(
                done.text,
                rest_logprobs(logprobs, 0, len(done.text)),
                text[line_start : plan.offset],
                text[plan.offset : line_end if line_end >= 0 else len(text)],
                snap.language_id,
                False,
                0,
            )
            key.gate_p = self.gate.probability(x)
            key.gate_held = key.gate_p < settings.showGateThreshold
            self.gate.put(
                uri, Put(text[: plan.offset], text[plan.offset :], done.text, x, key.gate_held)
            )
        t6 = time.perf_counter()

        engine_s = probe.seconds.get("engine", 0.0)
        gens = list(TimedGeneration.made)
        loop_s = sum(g.result.total_s for g in gens)
        prefill_s = sum(g.result.prefill_s for g in gens)
        first_s = sum((g.result.ttft_s or g.result.total_s) for g in gens)
        ms["edit"] = 1000 * (t1 - t0)
        ms["snapshot"] = 1000 * (t2 - t1)
        ms["request"] = 1000 * (t3 - t2)
        ms["plan"] = 1000 * (t4 - t3)
        ms["engine_before"] = 1000 * (engine_s - loop_s)
        ms["prefill"] = 1000 * prefill_s
        ms["first_token"] = 1000 * (first_s - prefill_s)
        ms["decode"] = 1000 * (loop_s - first_s)
        ms["post"] = 1000 * ((t5 - t4) - engine_s)
        ms["gate"] = 1000 * (t6 - t5)
        for name in (
            "request.snippets",
            "request.recent",
            "request.names",
            "plan.context",
            "plan.names",
            "post.postprocess",
            "post.syntax",
        ):
            key.parts_ms[name] = 1000 * probe.seconds.get(name, 0.0)
        decode_pass_s = sum(s for g in gens for phase, _, s in g.passes if phase == "decode")
        key.parts_ms["decode.passes"] = 1000 * decode_pass_s
        key.parts_ms["decode.outside"] = ms["decode"] - 1000 * decode_pass_s
        key.generations = len(gens)
        key.single_line = plan.site.single_line
        key.short_plan = plan.deferred is not None
        key.answer, key.empty_reason = done.text, done.empty_reason
        if gens:
            first = gens[0]
            res = first.result
            key.prompt_tokens, key.reused_tokens = res.prompt_tokens, res.reused_tokens
            key.computed_tokens = res.prompt_tokens - res.reused_tokens
            key.new_tokens, key.finish = res.new_tokens, res.finish.value
            key.decode_passes = sum(1 for phase, _, _ in first.passes if phase == "decode")
            key.drafted, key.accepted = res.drafted, res.accepted
            key.tpot_ms = 1000 * res.tpot_s if res.tpot_s is not None else None
            key.token_gaps_ms = [
                round(1000 * (b - a), 2) for a, b in itertools.pairwise(first.token_s)
            ]
            key.raw = res.text
        elif done.result is not None:
            key.finish = "cached" if done.result.cached else done.result.finish.value
            key.raw = done.result.text


# -- the report ------------------------------------------------------------------------------------


def common_keys(answer: str, rest: str, next_key: str) -> int:
    """How many of the following keys `answer` spells exactly (the next key being `next_key`,
    then `rest` after it, one character a key)."""
    whole = next_key + rest
    n = 0
    while n < len(answer) and n < len(whole) and answer[n] == whole[n]:
        n += 1
    if n < len(next_key):
        return 0
    return 1 + (n - len(next_key)) if next_key else 0


def summarize(keys: list[Key], settings: Settings) -> dict[str, Any]:
    totals = [k.total_ms for k in keys]
    grand = sum(totals) or 1.0
    stages = {}
    for name, label in STAGES:
        values = [k.ms[name] for k in keys]
        p50, p95 = _stats(values)
        stages[name] = {
            "label": label,
            "p50_ms": p50,
            "p95_ms": p95,
            "share": round(sum(values) / grand, 3),
        }
    parts = {}
    for name, label in PARTS:
        values = [k.parts_ms.get(name, 0.0) for k in keys]
        p50, p95 = _stats(values)
        parts[name] = {
            "label": label,
            "p50_ms": p50,
            "p95_ms": p95,
            "share": round(sum(values) / grand, 3),
        }
    ran = [k for k in keys if k.generations]
    tpots = [k.tpot_ms for k in ran if k.tpot_ms is not None]
    pass_ms = [k.parts_ms["decode.passes"] / k.decode_passes for k in ran if k.decode_passes]
    outside_ms = [k.parts_ms["decode.outside"] / k.decode_passes for k in ran if k.decode_passes]
    prefill_per_token = [k.ms["prefill"] / k.computed_tokens for k in ran if k.computed_tokens]
    # What the next key would have made reusable.
    pairs = [(a, b) for a, b in itertools.pairwise(keys) if a.region == b.region]
    answered = [a for a, _ in pairs if a.answer]
    matched = [
        (a, b) for a, b in pairs if a.answer and a.next_key and a.answer.startswith(a.next_key)
    ]
    raw_matched = [a for a, _ in pairs if a.raw and a.next_key and a.raw.startswith(a.next_key)]
    late_matched = [(a, b) for a, b in matched if a.total_ms > KEY_GAP_MS]
    covers = [common_keys(a.answer, a.rest[len(a.next_key) :], a.next_key) for a, _ in matched]
    into_answer = [
        b for a, b in pairs if a.generations and b.generations and b.reused_tokens > a.prompt_tokens
    ]
    return {
        "keys": len(keys),
        "debounce_ms": settings.debounceMs,
        "max_tokens": settings.maxTokens,
        "stages": stages,
        "parts": parts,
        "total": dict(zip(("p50_ms", "p95_ms"), _stats(totals), strict=True)),
        "over_130_ms": sum(t > KEY_GAP_MS for t in totals),
        "over_300_ms": sum(t > PAUSE_BUDGET_MS for t in totals),
        "over_300_ms_with_debounce": sum(t + settings.debounceMs > PAUSE_BUDGET_MS for t in totals),
        "model_runs": len(ran),
        "decoded_tokens_p50": statistics.median([k.new_tokens for k in ran]) if ran else None,
        "decoded_tokens_p95": percentile([k.new_tokens for k in ran], 0.95) if ran else None,
        "ms_per_decoded_token_p50": _stats(tpots)[0],
        "ms_per_decode_pass_p50": _stats(pass_ms)[0],
        "ms_outside_passes_per_decode_pass_p50": _stats(outside_ms)[0],
        "decode_passes_p50": statistics.median([k.decode_passes for k in ran]) if ran else None,
        "drafted": sum(k.drafted for k in ran),
        "accepted": sum(k.accepted for k in ran),
        "prompt_tokens_p50": statistics.median([k.prompt_tokens for k in ran]) if ran else None,
        "computed_tokens_p50": statistics.median([k.computed_tokens for k in ran]) if ran else None,
        "computed_tokens_p95": percentile([k.computed_tokens for k in ran], 0.95) if ran else None,
        "ms_per_prefill_token_p50": _stats(prefill_per_token)[0],
        "tokenizer_calls_p50": statistics.median([k.tokenizer_calls for k in keys]),
        "block_answers": sum(not k.single_line for k in keys),
        "short_plans": sum(k.short_plan for k in keys),
        "answers": sum(bool(k.answer) for k in keys),
        "held_by_gate": sum(k.gate_held for k in keys),
        "empty_reasons": dict(
            sorted(
                {
                    r: sum(k.empty_reason == r for k in keys)
                    for r in {k.empty_reason for k in keys}
                    if r
                }.items()
            )
        ),
        "next_key": {
            "pairs": len(pairs),
            "answered": len(answered),
            "answer_starts_with_next_key": len(matched),
            "raw_starts_with_next_key": len(raw_matched),
            "of_those_total_over_130_ms": len(late_matched),
            "next_key_ms_saved_if_kept": round(sum(b.total_ms for _, b in late_matched), 1),
            "keys_covered_p50": statistics.median(covers) if covers else None,
            "keys_covered_sum": sum(covers),
            "kv_into_previous_answer": len(into_answer),
        },
    }


def print_report(summary: dict[str, Any], meta: dict[str, Any]) -> None:
    s = summary
    print(
        f"\n{meta['model']} on {meta['cpus']} cores, {meta['repo']} ({meta['regions']} region(s)), "
        f"{s['keys']} keys, maxTokens {s['max_tokens']}; each key run to its end\n"
    )
    print(f"{'stage':<42} {'p50 ms':>8} {'p95 ms':>8} {'share':>7}")
    print(
        f"{'debounce (debounceMs, before all of it)':<42} {s['debounce_ms']:>8} {'-':>8} {'-':>7}"
    )
    for name, _ in STAGES:
        row = s["stages"][name]
        print(
            f"{row['label']:<42} {row['p50_ms']:>8} {row['p95_ms']:>8} {100 * row['share']:>6.1f}%"
        )
    print(
        f"{'total (debounce aside)':<42} {s['total']['p50_ms']:>8} {s['total']['p95_ms']:>8} {'100%':>7}"
    )
    print("\nparts of the rows above")
    for name, _ in PARTS:
        row = s["parts"][name]
        print(
            f"{row['label']:<42} {row['p50_ms']:>8} {row['p95_ms']:>8} {100 * row['share']:>6.1f}%"
        )
    n = s["keys"]
    print(
        f"\nkeys over {KEY_GAP_MS:.0f} ms: {s['over_130_ms']} of {n}; over {PAUSE_BUDGET_MS:.0f} ms: "
        f"{s['over_300_ms']} of {n} ({s['over_300_ms_with_debounce']} with the debounce)"
    )
    print(
        f"model runs {s['model_runs']}; decoded tokens per answer p50 {s['decoded_tokens_p50']} "
        f"(p95 {s['decoded_tokens_p95']}); ms per decoded token p50 {s['ms_per_decoded_token_p50']}; "
        f"decode passes p50 {s['decode_passes_p50']}, {s['ms_per_decode_pass_p50']} ms a pass in "
        f"the model + {s['ms_outside_passes_per_decode_pass_p50']} ms outside it; drafts "
        f"{s['accepted']} of {s['drafted']} accepted"
    )
    print(
        f"prompt tokens p50 {s['prompt_tokens_p50']}; computed per key p50 {s['computed_tokens_p50']}"
        f" (p95 {s['computed_tokens_p95']}), {s['ms_per_prefill_token_p50']} ms a token; "
        f"tokenizer calls per plan p50 {s['tokenizer_calls_p50']}"
    )
    print(
        f"answers {s['answers']} of {n} (held back by the gate {s['held_by_gate']}); block "
        f"(multi-line) plans {s['block_answers']}; short cold plans {s['short_plans']}; "
        f"empty: {s['empty_reasons']}"
    )
    nk = s["next_key"]
    print(
        f"\nthe next key: of {nk['pairs']} keys followed by another, {nk['answered']} had an answer; "
        f"it started with the next key at {nk['answer_starts_with_next_key']} (the engine's raw "
        f"text at {nk['raw_starts_with_next_key']}), {nk['of_those_total_over_130_ms']} of them "
        f"over {KEY_GAP_MS:.0f} ms (the generation the next key cancels; keeping it would have "
        f"saved the next key's {nk['next_key_ms_saved_if_kept']} ms); such an answer covers "
        f"{nk['keys_covered_p50']} keys p50 ({nk['keys_covered_sum']} in all); the next key's "
        f"prompt reused KV of the previous answer at {nk['kv_into_previous_answer']} keys"
    )


def build_engine(settings: Settings, kv_dir: Path) -> Engine:
    from models.choice import selected_model

    return Engine(
        EngineConfig(
            model_name=selected_model(),
            pool=PoolConfig(budget_bytes=settings.kvCacheMB << 20),
            completions_load_models=False,
            cache_dir=None,  # nothing from an earlier run answers a key
            kv_store_dir=kv_dir,
        )
    )


def install_probes(probe: Probe, engine: Engine) -> None:
    engine_module.Generation = TimedGeneration  # type: ignore[misc]
    probe.patch(engine, "generate", "engine")
    probe.patch(planner_module, "index_names", "request.names")
    probe.patch(plan_module, "build_context", "plan.context")
    probe.patch(plan_module, "_name_hints", "plan.names")
    probe.patch(run_module, "postprocess_report", "post.postprocess")
    probe.patch(run_module, "adds_syntax_errors", "post.syntax")
    model = engine.load(FAST)
    # Every encode while planning (the budget's counts and the prompt's ids); the engine's own
    # calls (healing) happen inside `generate` and are counted there.
    probe.patch(model.tokenizer, "encode", "plan.tokenizer")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="a built model's name (default: FASTCOMPLETE_MODEL)")
    parser.add_argument("--repo", default="openai-agents-python", choices=sorted(BY_NAME))
    parser.add_argument("--keys", type=int, default=60, help="keys typed, over regions")
    parser.add_argument(
        "--max-tokens", type=int, help="the maxTokens setting (default: its default)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-chars", type=int, default=300)
    parser.add_argument("--json", type=Path, default=RESULTS / "key_cost.json")
    args = parser.parse_args()
    if args.model:
        os.environ["FASTCOMPLETE_MODEL"] = args.model
    repo = BY_NAME[args.repo]
    root = repo_dir(repo)
    if not checked_out(repo, root):
        raise SystemExit(f"{root}: not at the pin; run `.venv/bin/python bench/unseen_repos.py`")
    settings = Settings()
    if args.max_tokens:
        settings = dataclasses.replace(settings, maxTokens=args.max_tokens)

    regions = assist.regions(
        max(1, args.keys // 10 + 2), args.seed, args.max_chars, root, {repo.language}
    )
    scratch = Path(tempfile.mkdtemp(prefix="fastcomplete-keycost-"))
    probe = Probe()
    engine = build_engine(settings, scratch / "kv")
    keys: list[Key] = []
    used = 0
    try:
        started = time.perf_counter()
        install_probes(probe, engine)
        load_s = time.perf_counter() - started
        for number, region in enumerate(regions):
            if len(keys) >= args.keys:
                break
            workspace = held_out_copy(root, {region.path}, scratch)
            index = WorkspaceIndex(workspace, scratch / "index", exclusions=Exclusions(workspace))
            started = time.perf_counter()
            index.build()
            index_s = time.perf_counter() - started
            print(
                f"index of {workspace.name}: {index.file_count} files in {index_s:.1f} s",
                file=sys.stderr,
            )
            run = KeyCost(engine, settings, index, probe)
            uri = (workspace / region.path).as_uri()
            keys += run.region(number, region, uri, args.keys - len(keys))
            used += 1
    finally:
        engine.close()
        shutil.rmtree(scratch, ignore_errors=True)
    from models.choice import selected_model

    meta = {
        "model": selected_model(),
        "repo": repo.name,
        "unseen": repo.unseen,
        "regions": used,
        "cpus": os.cpu_count(),
        "load_s": round(load_s, 2),
        "seed": args.seed,
    }
    summary = summarize(keys, settings)
    print_report(summary, meta)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            **dataclasses.asdict(k),
            "total_ms": k.total_ms,
            "ms": {n: round(v, 2) for n, v in k.ms.items()},
            "parts_ms": {n: round(v, 2) for n, v in k.parts_ms.items()},
        }
        for k in keys
    ]
    args.json.write_text(json.dumps({**meta, "summary": summary, "keys": rows}, indent=2))
    print(f"\nwritten to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
