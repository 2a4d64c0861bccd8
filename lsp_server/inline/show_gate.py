"""Show or stay quiet: a small logistic model of whether this person takes a suggestion, learned
on this machine from what they did with the ones before, per workspace.

Features the server has anyway: how sure the model was of the suggestion's tokens (mean, least,
first), its length, whether it spans lines, where the cursor is in its line, the language,
whether it was computed ahead (prefetch) and how much of it the person has typed through (the
rest of a suggestion being typed is put to the gate again at each key). Below
`showGateThreshold` the suggestion is held back.

Every suggestion put to the gate, shown or held back, gets its label from what the person does
next in that document: taken (accepted whole or in part, or typed to the end, or its first line)
or passed over (the text at its place came to differ from it). A held-back one is labelled the
same way, so the gate also learns from the suggestions it kept quiet, and the stats say how many
of those the person then typed anyway. The labels (a bounded sample) and the weights refit from
them live in $FASTCOMPLETE_HOME/gate/, one file per workspace; nothing leaves the machine. Before
any label the weights are the seed (lsp_server.config.tuning.GATE_SEED_WEIGHTS), fitted on another
repository's typing replay; the refit keeps them close to it until there is data to move them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lsp_server.config.tuning import (
    GATE_LANGUAGES,
    GATE_PENDING_PER_DOCUMENT,
    GATE_PRIOR_WEIGHT,
    GATE_REFIT_LABELS,
    GATE_SAMPLES_KEPT,
    GATE_SEED_WEIGHTS,
)

log = logging.getLogger(__name__)

FEATURES = (
    "bias",
    "mean_logprob",
    "least_logprob",
    "first_logprob",
    "log_chars",
    "multi_line",
    "mid_line",
    "line_start",
    "mid_word",
    "prefetch",
    "typed_through",
    "no_logprobs",
    *(f"lang_{lang}" for lang in GATE_LANGUAGES),
)
FORMAT_VERSION = 1
COUNTS = ("heldBack", "heldBackTaken", "shownTaken", "shownPassed")


def seed_weights() -> np.ndarray:
    return np.array([GATE_SEED_WEIGHTS.get(f, 0.0) for f in FEATURES])


@dataclass(frozen=True)
class Put:
    """A suggestion put to the gate, until what the person did with it is known."""

    before: str  # the document before its anchor
    after: str  # the document after it
    text: str
    x: tuple[float, ...]
    held: bool  # held back (not shown)


def features(
    text: str,
    logprobs: tuple[float, ...],
    line_prefix: str,
    line_suffix: str,
    language_id: str,
    prefetch: bool,
    typed: int = 0,
) -> tuple[float, ...]:
    """The gate's input for one suggestion, in FEATURES' order. `typed`: characters of it the
    person has typed through (what is put to the gate is then its rest)."""
    probs = [max(p, -12.0) for p in logprobs]
    known = bool(probs)
    last = line_prefix[-1:]
    return (
        1.0,
        sum(probs) / len(probs) if known else 0.0,
        min(probs) if known else 0.0,
        probs[0] if known else 0.0,
        math.log1p(len(text)) / 4,
        float("\n" in text.strip("\n")),
        float(bool(line_suffix.strip())),
        float(not line_prefix.strip()),
        float(last.isalnum() or last == "_"),
        float(prefetch),
        math.log1p(typed) / 4,
        float(not known),
        *(float(language_id == lang) for lang in GATE_LANGUAGES),
    )


def rest_logprobs(logprobs: tuple[float, ...], typed: int, rest_chars: int) -> tuple[float, ...]:
    """The log-probabilities of the tokens of what is left to show: for a rest being typed
    through, the tokens after the `typed` characters (placed by characters: the text's tokens
    are not at hand here)."""
    if not typed or not logprobs:
        return logprobs
    whole = typed + rest_chars
    return logprobs[min(len(logprobs) - 1, len(logprobs) * typed // whole) :]


def outcome(put: Put, text: str) -> bool | None:
    """Whether the person took `put` (True), passed it over (False), or may still be typing it
    (None), judged from the document's `text` now."""
    if not (text.startswith(put.before) and text.endswith(put.after)):
        return False  # written over, or left for another place
    typed = text[len(put.before) : len(text) - len(put.after)]
    if typed.startswith(put.text):
        return True
    first = put.text.split("\n", 1)[0]
    if "\n" in put.text and first.strip() and typed.startswith(first + "\n"):
        return True  # its first line, then the person's own
    if put.text.startswith(typed):
        return None
    return False


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-max(-30.0, min(30.0, z))))


def fit(
    xs: np.ndarray, ys: np.ndarray, prior: np.ndarray, prior_weight: float, steps: int = 300
) -> np.ndarray:
    """Logistic regression by gradient descent, pulled toward `prior` (an L2 penalty of
    `prior_weight` per sample's worth): with few labels the weights stay near the seed."""
    w = prior.copy()
    n = max(len(ys), 1)
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(xs @ w, -30, 30)))
        grad = xs.T @ (p - ys) / n + prior_weight * (w - prior) / n
        w -= 0.5 * grad
    return w


def gate_file(home: Path, workspace: Path | None) -> Path:
    key = str(workspace.resolve()) if workspace is not None else "(no workspace)"
    return home / "gate" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


class ShowGate:
    """Suggestions are put to it and labelled on the event loop; refits run on a thread of their
    own, and planning threads read the weights."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, deque[Put]] = {}
        self.path: Path | None = None  # where the workspace's labels are kept (None: nowhere)
        self.weights = seed_weights()
        self._samples: deque[tuple[tuple[float, ...], int]] = deque(maxlen=GATE_SAMPLES_KEPT)
        self.counts = dict.fromkeys(COUNTS, 0)
        self._since_fit = 0
        self._refits: list[threading.Thread] = []
        self._fits = 0  # refits started; the weights are from the newest one that finished
        self._fitted = 0
        # One writer of the file at a time; taken before self._lock, never inside it.
        self._write_lock = threading.Lock()

    def use(self, path: Path) -> None:
        """Keep this workspace's labels and weights in `path` (read now, when it exists)."""
        with self._lock:
            self.path = path
            self.weights = seed_weights()
            self._samples.clear()
            self.counts = dict.fromkeys(COUNTS, 0)
            self._fitted = self._fits  # a refit under way is of the last workspace's labels
            self._load(path)

    def probability(self, x: tuple[float, ...]) -> float:
        return sigmoid(float(np.dot(self.weights, x)))

    def put(self, uri: str, put: Put) -> None:
        """Remember `put` until the person's next moves in `uri` label it."""
        with self._lock:
            queue = self._pending.setdefault(uri, deque(maxlen=GATE_PENDING_PER_DOCUMENT))
            # Asked again at the same place: the same suggestion once, as last decided.
            same = next((p for p in queue if (p.before, p.text) == (put.before, put.text)), None)
            if same is not None:
                queue.remove(same)
            queue.append(put)
            self.counts["heldBack"] += put.held and not (same is not None and same.held)

    def observe(self, uri: str, text: str) -> None:
        """The document as the person has it now: label what it settles."""
        with self._lock:
            queue = self._pending.get(uri)
            if not queue:
                return
            for put in list(queue):
                took = outcome(put, text)
                if took is not None:
                    queue.remove(put)
                    self._label(put, took)

    def taken(self, uri: str, text: str | None) -> None:
        """A suggestion in `uri` was accepted (whole or in part; `text`: what was, if known):
        the one it came from is taken, the others there passed over."""
        with self._lock:
            queue = list(self._pending.pop(uri, deque()))
            for i, put in enumerate(queue):
                if text is None:  # the newest one, then
                    self._label(put, i == len(queue) - 1)
                else:
                    self._label(put, put.text.startswith(text) or text in put.text)

    def forget(self, uri: str) -> None:
        with self._lock:
            self._pending.pop(uri, None)
        self.save()

    def _label(self, put: Put, took: bool) -> None:
        if put.held:
            self.counts["heldBackTaken"] += took
        else:
            self.counts["shownTaken" if took else "shownPassed"] += 1
        self._samples.append((put.x, int(took)))
        self._since_fit += 1
        if self._since_fit >= GATE_REFIT_LABELS:
            # Off the event loop: a refit and its file take tens of milliseconds.
            self._since_fit = 0
            self._fits += 1
            refit = threading.Thread(
                target=self._refit,
                args=(list(self._samples), self._fits),
                name="show-gate",
                daemon=True,
            )
            self._refits = [t for t in self._refits if t.is_alive()] + [refit]
            refit.start()

    def _refit(self, samples: list[tuple[tuple[float, ...], int]], number: int) -> None:
        xs = np.array([x for x, _ in samples], dtype=np.float64)
        ys = np.array([y for _, y in samples], dtype=np.float64)
        weights = fit(xs, ys, seed_weights(), GATE_PRIOR_WEIGHT)
        with self._lock:
            if number <= self._fitted:
                return  # a newer refit (on more labels) finished first, or another workspace's
            self._fitted, self.weights = number, weights
        self.save()

    def flush(self) -> None:
        """Wait for the refits under way (tests; the next session reads what they saved)."""
        for refit in list(self._refits):
            refit.join()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {**self.counts, "labels": len(self._samples)}

    def samples(self) -> list[tuple[tuple[float, ...], int]]:
        with self._lock:
            return list(self._samples)

    def save(self) -> None:
        """Write the gate as it is now. The file's lock is held from reading the gate to writing
        it, so the files land in the order they were read and the last one written holds the
        newest weights (an older refit's save, read and then overtaken by a newer one's before
        writing, used to leave the older weights on disk)."""
        with self._write_lock:
            with self._lock:
                path = self.path
                data = {
                    "version": FORMAT_VERSION,
                    "features": FEATURES,
                    "weights": [round(float(w), 6) for w in self.weights],
                    "samples": [[*(round(v, 4) for v in x), y] for x, y in self._samples],
                    "counts": dict(self.counts),
                }
            if path is None:
                return
            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(data))
                os.replace(tmp, path)
            except OSError as exc:
                log.warning("could not save the show gate's data to %s: %s", path, exc)

    def _load(self, path: Path) -> None:
        """The workspace's labels and weights; the seed when there are none, or they are
        unreadable or from other features (the file is then rewritten at the next refit)."""
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignored the show gate's data in %s: %s", path, exc)
            return
        if data.get("version") != FORMAT_VERSION or tuple(data.get("features", ())) != FEATURES:
            log.info("the show gate's data in %s is for other features: starting again", path)
            return
        try:
            weights = np.array([float(w) for w in data["weights"]])
            if weights.shape != (len(FEATURES),):
                raise ValueError(f"{len(weights)} weights for {len(FEATURES)} features")
            self.weights = weights
            for row in data["samples"][-GATE_SAMPLES_KEPT:]:
                self._samples.append((tuple(float(v) for v in row[:-1]), int(row[-1])))
            counts = data.get("counts", {})
            self.counts.update({k: int(counts[k]) for k in COUNTS if k in counts})
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("ignored the show gate's data in %s: %s", path, exc)
            self.weights = seed_weights()
            self._samples.clear()
