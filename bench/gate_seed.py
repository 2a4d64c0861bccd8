"""The show gate's seed: weights fitted on the labels of a typing replay, and what each threshold
would have held back of them.

    .venv/bin/python -m bench.assist --configs "fast with the gate observing" \\
        --files ~/.cache/fastcomplete/eval-repos/mcp-python/mcp --seed 11 --json /tmp/seed.json
    .venv/bin/python -m bench.gate_seed /tmp/seed.json

or, on the unseen repositories the gate is tuned on (github-mcp-server stays out):

    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python bench/unseen.py keys \\
        --repos openai-agents-python,tableau-mcp --regions 12 --seed 11 \\
        --settings '{"showGateThreshold": 0.0}' --json /tmp/seed.json
    .venv/bin/python -m bench.gate_seed /tmp/seed.json

The labels come from the server's own gate file (left in the replay's server home): every
suggestion it was shown, taken or passed over, with its features. The printed weights go to
lsp_server.config.tuning.GATE_SEED_WEIGHTS; the threshold table is for GATE_MIN_PROBABILITY. Fit it on
a repository other than the ones the replay reports (the default replay types this project and
the standard library).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from lsp_server.inline.show_gate import FEATURES, fit

THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
RIDGE = 1.0  # a little pull toward zero: features the replay never varies stay at 0


def labels(replay_json: Path) -> tuple[np.ndarray, np.ndarray]:
    data = json.loads(replay_json.read_text())
    rows: list[list[float]] = []
    # bench/assist.py's JSON holds "configs"; bench/unseen.py keys' holds "repos", one each.
    for config in data.get("configs", data.get("repos", [])):
        for path in Path(config["server_home"], "gate").glob("*.json"):
            gate = json.loads(path.read_text())
            if tuple(gate["features"]) != FEATURES:
                sys.exit(f"{path}: written for other features")
            rows.extend(gate["samples"])
    if not rows:
        sys.exit("no labels: was the replay run with the gate observing?")
    table = np.array(rows, dtype=np.float64)
    return table[:, :-1], table[:, -1]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("replay", type=Path, help="bench/assist.py's JSON")
    args = parser.parse_args()
    xs, ys = labels(args.replay)
    w = fit(xs, ys, np.zeros(len(FEATURES)), RIDGE, steps=3000)
    p = 1 / (1 + np.exp(-(xs @ w)))
    print(f"{len(ys)} labels, {int(ys.sum())} taken ({ys.mean():.1%})")
    print("GATE_SEED_WEIGHTS = {")
    for name, weight in zip(FEATURES, w, strict=True):
        if abs(weight) >= 0.005:
            print(f'    "{name}": {weight:.2f},')
    print("}")
    print(f"\n{'threshold':>9} {'shown':>6} {'taken':>6} {'taken/shown':>11} {'taken kept':>10}")
    for t in (0.0, *THRESHOLDS):
        kept = p >= t
        shown, taken = int(kept.sum()), int(ys[kept].sum())
        share = taken / shown if shown else 0.0
        print(f"{t:>9} {shown:>6} {taken:>6} {share:>11.3f} {taken / max(ys.sum(), 1):>10.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
