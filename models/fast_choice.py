"""The fast model's weight bits: each device's default, and the pick among measured candidates.

Where nothing was measured on the machine, FAST_BITS decides. On a GPU, bench/fast_choice.py
measures each candidate (16: the standard FP16 graph; 8 and 4: MatMulNBits weights) for decode
speed and agreement with the standard graph; `choose` picks one, `report` is what the bench
writes (--json) and `fastcomplete models build --fast-choice FILE` reads it back with
`manifest_record`, building the pick and keeping the measurements in the manifest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# The fast model's weight bits on each device, where no measurement on the machine chose them.
# 16: the fast model is the FP16 standard graph, loaded once.
FAST_BITS = {"cpu": 8, "cuda": 16}
FAST_BITS_BASIS = {
    "cpu": "default: 8-bit weights keep 97.5% top-1 agreement and prefill fastest on the CPU",
    "cuda": "default: on a lent H200 (bench/gpu_shape.py, 2026-12-04) Qwen2.5-Coder-1.5B's FP16 "
    "decode (3.2 ms/token) beat its 8-bit (3.4-5.1); 4-bit not yet measured there",
}


@dataclass
class BitsCandidate:
    """One candidate's measurements: the bench writes them, the manifest keeps them."""

    bits: int
    graph: str  # the model file measured
    decode_ms: float
    agreement: float  # teacher-forced top-1 agreement with the standard graph
    gate: float  # the build's agreement gate for these bits

    @property
    def passes(self) -> bool:
        return self.agreement >= self.gate


def choose(rows: list[BitsCandidate]) -> int:
    """The fastest candidate that passes its gate; more bits when equally fast."""
    passing = [r for r in rows if r.passes]
    if not passing:
        raise ValueError("no candidate passes its agreement gate")
    return min(passing, key=lambda r: (r.decode_ms, -r.bits)).bits


def report(model: str, device: str, context: int, rows: list[BitsCandidate]) -> dict[str, Any]:
    """The measurements and their pick, as bench/fast_choice.py writes them (--json)."""
    return {
        "model": model,
        "device": device,
        "context": context,
        "chosen_bits": choose(rows),
        "rows": [asdict(r) for r in rows],
    }


def manifest_record(data: dict[str, Any], source: str) -> dict[str, Any]:
    """What a build records of a `report` read from the file named `source` (its pick and what
    was measured). Raises KeyError, TypeError or ValueError when `data` is not a report."""
    return {
        "bits": int(data["chosen_bits"]),
        "basis": f"measured: {source} ({data.get('device', '?')})",
        "measured": data["rows"],
    }
