"""A new user's machine: collecting the tests builds nothing and needs no model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_collection_on_an_empty_home_touches_no_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env={**os.environ, "FASTCOMPLETE_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert " tests collected in " in out.stdout.splitlines()[-1]  # no "errors" in that line
    assert list(home.iterdir()) == []  # nothing was built, copied or cached
