"""`fastcomplete demo` (what `make demo` ends with), run as a user runs it, on the real models."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from models.choice import default_model as default_model_name


def test_demo_shows_model_latency_then_the_remembered_answer_on_every_run(
    default_model: Path,
) -> None:
    for run in range(2):  # a second run must not be served from the first run's cache
        out = subprocess.run(
            [sys.executable, "-m", "lsp_server.cli", "demo"],
            capture_output=True,
            text=True,
            timeout=300,
            env={k: v for k, v in os.environ.items() if k != "FASTCOMPLETE_MODEL"},
        )
        assert out.returncode == 0, out.stderr[-2000:]
        # Nothing but the demo's own lines: no protocol noise (the status bar's feed is handled).
        assert "Ignoring notification" not in out.stdout + out.stderr, out.stderr[-2000:]
        completions = re.findall(
            r"^(fast \(INT8\)|standard \(FP32\))\s+\d+ ms  -> '(.+)'$", out.stdout, re.M
        )
        assert [label for label, _ in completions] == ["fast (INT8)", "standard (FP32)"], out.stdout
        assert all(text.strip() for _, text in completions), out.stdout
        again = re.findall(r"^  asked again\s+\d+ ms  -> '(.+)'  \(remembered", out.stdout, re.M)
        assert again == [text for _, text in completions], out.stdout
        for model in (f"{default_model_name()}/fast", f"{default_model_name()}/standard"):
            # A fresh cache each run: nothing comes from the previous run's.
            assert re.search(
                rf"^{model}: \d+ requests, 0 cache hits, TTFT p50 \d+ ms", out.stdout, re.M
            ), (run, out.stdout)
        assert "explain `load_orders`" in out.stdout
        assert f"({default_model_name()}/standard," in out.stdout
