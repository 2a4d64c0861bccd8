"""The import rules (docs/architecture.md): each package imports only those below it, and no
module anywhere is part of a circle. The contracts are import-linter's, in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on the packages of `tree` (found there first, not in the installed ones)."""
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
    )


def test_no_import_runs_up_and_none_goes_round() -> None:
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """The check can fail: a copy of the tree whose text layer reaches up into the inline policy
    is refused, and so is one where the engine imports the build pipeline."""
    for package in ("lsp_server", "models", "inference"):
        shutil.copytree(ROOT / package, tmp_path / package)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "lsp_server" / "text" / "upward.py").write_text(
        "from lsp_server.inline import policy  # noqa: F401\n"
    )
    (tmp_path / "inference" / "upward.py").write_text("import models.catalogue  # noqa: F401\n")
    run = _lint_imports(tmp_path)
    assert run.returncode != 0
    assert "lsp_server.text is not allowed to import lsp_server.inline" in run.stdout
    assert "inference is not allowed to import models" in run.stdout
