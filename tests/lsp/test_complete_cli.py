"""`fastcomplete complete` runs the editor's pipeline: same text as an LSP inline completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from tests.lsp.helpers import config, inline, model_options, open_doc, start, wait_ready

pytestmark = pytest.mark.real_model

SOURCE = '''import json
from pathlib import Path


def load_settings(path: Path) -> dict:
    """Read the settings file, or the defaults when there is none."""
    if not path.exists():
        return {"theme": "dark", "font_size": 12}
    with path.open() as fh:
        return json.load(fh)


def save_settings(path: Path, settings: dict) -> None:
    with path.open("w") as fh:
        json.dump(settings, fh, indent=2)


def font_size(path: Path) -> int:
    settings = load_settings(path)
    return settings.get("font_size", 12)
'''
# Inside `def font_size` after `settings = load_settings(`: the rest of that line deleted, as a
# person typing it would have it.
LINE, CUT = 18, "    settings = load_settings("


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = SOURCE.split("\n")
    assert lines[LINE].startswith(CUT)
    lines[LINE] = CUT
    path = tmp_path_factory.mktemp("cli") / "settings_store.py"
    path.write_text("\n".join(lines))
    return path


def _cli(document: Path, real_model: Path, *extra: str) -> dict:
    env = {**os.environ, "FASTCOMPLETE_HOME": str(real_model.parent.parent)}
    env["FASTCOMPLETE_MODEL"] = real_model.name
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "lsp_server.cli",
            "complete",
            str(document),
            "--json",
            "--line",
            str(LINE),
            "--character",
            str(len(CUT)),
            "--no-cache",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout)


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, real_model: Path):
    await start(lsp_client, model_options(real_model))
    await wait_ready(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_complete_gives_what_the_editor_shows(
    client: LanguageClient, document: Path, real_model: Path
) -> None:
    uri = document.resolve().as_uri()
    open_doc(client, uri, document.read_text())
    served = await inline(client, uri, LINE, len(CUT))
    cli = _cli(document, real_model)
    assert cli["text"], cli  # a real completion, not an agreement on nothing
    assert served.items and served.items[0].insert_text == cli["text"]
    assert cli["model"] == f"{real_model.name}/fast" and cli["finish"] != "deadline"
    for field in ("ttft_ms", "tpot_ms", "prompt_tokens", "reused_tokens", "new_tokens"):
        assert field in cli
    # The idle warm-up put the whole prompt in the KV cache: the request feeds one token.
    assert cli["reused_tokens"] == cli["prompt_tokens"] - 1 and cli["trimmed_tokens"] == 0
