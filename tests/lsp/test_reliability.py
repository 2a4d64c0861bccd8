"""Faults, security and observability of `fastcomplete serve`, end to end (tiny model: fast)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import stat
import tempfile
import urllib.request
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.helpers import SERVER, command, inline, model_options, open_doc, start

SOURCE = "import os\n\n\ndef list_files(root):\n    return sorted(os.listdir(root"
END = (4, 33)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _broken_copy(tiny: Path, kind: str, root: Path) -> Path:
    """A copy of the tiny model whose fast model file is missing, truncated or altered."""
    shutil.copytree(tiny / "fast", root / "fast")
    model = root / "fast" / "model.onnx"
    data = model.read_bytes()
    if kind == "missing":
        model.unlink()
    elif kind == "truncated":
        model.write_bytes(data[: len(data) // 3])
    else:  # same size, one byte changed: only the sha256 tells
        middle = len(data) // 2
        model.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    return root


async def _messages(client: LanguageClient, needle: str, timeout: float = 20.0) -> list[str]:
    for _ in range(int(timeout * 10)):
        found = [m.message for m in client.messages if needle in m.message]
        if found:
            return found
        await asyncio.sleep(0.1)
    return []


async def _ready(client: LanguageClient, variants: int = 1) -> dict:
    for _ in range(300):
        stats = await command(client, "fastcomplete.stats")
        if stats["modelsReady"] and len(stats.get("kv_cache_bytes", {})) >= variants:
            return stats
        await asyncio.sleep(0.1)
    raise TimeoutError("models did not load")


# -- fault injection ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["altered", "missing", "truncated"])
async def test_broken_fast_model_falls_back_to_standard(
    kind: str, tiny_model: Path, tmp_path: Path
) -> None:
    broken = _broken_copy(tiny_model, kind, tmp_path / "broken")
    cache_blocked_home = tmp_path / "home"
    cache_blocked_home.mkdir()
    (cache_blocked_home / "cache").write_text("a file where the cache directory should be")
    config = ClientServerConfig(
        server_command=SERVER, server_env={"FASTCOMPLETE_HOME": str(cache_blocked_home)}
    )
    client = await config.start()
    try:
        await start(client, model_options(tiny_model, fastModelPath=str(broken / "fast")))
        expected = {"missing": "missing", "truncated": "truncated", "altered": "sha256"}[kind]
        load_errors = await _messages(client, expected)
        assert len(load_errors) == 1 and "fastcomplete models build --force" in load_errors[0]
        # The cache directory is a file: reported once, and completions still work without it.
        assert len(await _messages(client, "completion cache")) == 1
        await _ready(client)
        open_doc(client, "file:///w/a.py", SOURCE)
        for _ in range(3):
            result = await inline(client, "file:///w/a.py", *END)
            assert result is not None
        stats = await command(client, "fastcomplete.stats")
        assert stats["models"]["tiny-llama/standard"]["requests"] >= 1
        assert stats["events"]["fallback.fast_to_standard"] >= 1
        fallback_notes = [
            m for m in client.messages if "completions come from the standard" in m.message
        ]
        assert len(fallback_notes) <= 1  # at most one message, however many requests
    finally:
        await client.shutdown_session()
        await client.stop()


# -- security and observability -------------------------------------------------------------------

GUARD_DIR = tempfile.mkdtemp(prefix="fc-guard-")
CONNECT_LOG = Path(GUARD_DIR) / "connects.log"
Path(GUARD_DIR, "sitecustomize.py").write_text(
    "import os, socket\n"
    "_log = os.environ['FASTCOMPLETE_CONNECT_LOG']\n"
    "_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex\n"
    "def _record(sock, address):\n"
    "    if sock.family in (socket.AF_INET, socket.AF_INET6):\n"
    "        with open(_log, 'a') as fh:\n"
    "            fh.write(repr(address) + '\\n')\n"
    "def connect(self, address):\n"
    "    _record(self, address)\n"
    "    return _connect(self, address)\n"
    "def connect_ex(self, address):\n"
    "    _record(self, address)\n"
    "    return _connect_ex(self, address)\n"
    "socket.socket.connect, socket.socket.connect_ex = connect, connect_ex\n"
)
SECURE_HOME = tempfile.mkdtemp(prefix="fc-secure-")
LOG_FILE = Path(SECURE_HOME) / "logs" / "server.log"
METRICS_PORT = _free_port()
DEAD_PORT = _free_port()
SECRET = "sk-live-" + "7" * 32


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[*SERVER, "--metrics-port", str(METRICS_PORT)],
        server_env={
            "FASTCOMPLETE_HOME": SECURE_HOME,
            "PYTHONPATH": GUARD_DIR,
            "FASTCOMPLETE_CONNECT_LOG": str(CONNECT_LOG),
            "FC_TEST_API_KEY": SECRET,
        },
    )
)
async def client(lsp_client: LanguageClient, tiny_model: Path):
    await start(
        lsp_client,
        model_options(
            tiny_model,
            remote={
                "url": f"http://127.0.0.1:{DEAD_PORT}/v1",
                "model": "smollm2",
                "apiKeyEnv": "FC_TEST_API_KEY",
                "retries": 0,
                "timeoutMs": 500,
            },
        ),
    )
    await _ready(lsp_client, variants=2)
    yield
    await lsp_client.shutdown_session()


async def test_security_and_observability(client: LanguageClient) -> None:
    code_marker = "def very_private_function_name(secret_argument):\n    return secret_arg"
    open_doc(client, "file:///w/private.py", code_marker)
    assert (await inline(client, "file:///w/private.py", 1, 21)) is not None
    # Explain goes to the remote endpoint first: it is down, so the local standard model answers
    # and the user is told once.
    selection = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 21}}
    for _ in range(2):
        result = await command(
            client, "fastcomplete.explain", {"uri": "file:///w/private.py", "range": selection}
        )
        assert result["model"] == "tiny-llama/standard"
    remote_notes = await _messages(client, "remote endpoint failed")
    assert len(remote_notes) == 1
    # Only the configured endpoint was ever contacted.
    contacted = CONNECT_LOG.read_text().splitlines() if CONNECT_LOG.exists() else []
    assert contacted and all(str(DEAD_PORT) in line for line in contacted), contacted
    # Prometheus metrics.
    body = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5).read()
    metrics = body.decode()
    assert 'fastcomplete_ttft_seconds_bucket{le="0.005",model="tiny-llama/fast"}' in metrics
    assert 'fastcomplete_model_events_total{kind="requests",model="tiny-llama/fast"}' in metrics
    assert 'fastcomplete_routing_events_total{event="fallback.remote_to_standard"}' in metrics
    assert 'fastcomplete_server_events_total{kind="requests"}' in metrics
    # Logs: JSON lines, private, and free of the key and of the user's code.
    await asyncio.sleep(0.3)
    lines = LOG_FILE.read_text().splitlines()
    assert lines and all(json.loads(line)["level"] for line in lines)
    everything = LOG_FILE.read_text() + "".join(m.message for m in client.messages)
    assert SECRET not in everything
    assert "very_private_function_name" not in everything and "secret_arg" not in everything
    for private in (LOG_FILE.parent, Path(SECURE_HOME) / "cache"):
        assert stat.S_IMODE(private.stat().st_mode) == 0o700, private


async def test_huge_and_binary_documents(client: LanguageClient) -> None:
    big = ("x = 1\n" * 1_800_000) + "def f(a):\n    return a"  # ~10.8 MB
    open_doc(client, "file:///w/big.py", big)
    last = big.count("\n")
    result = await asyncio.wait_for(inline(client, "file:///w/big.py", last, 12), timeout=30)
    assert result is not None
    assert len(await _messages(client, "is large")) == 1
    open_doc(client, "file:///w/blob.py", "abc\x00\x01\x02def\n")
    assert not (await inline(client, "file:///w/blob.py", 0, 3)).items
    assert len(await _messages(client, "binary data")) == 1
    stats = await command(client, "fastcomplete.stats")
    assert stats["server"]["refused_binary"] == 1 and stats["server"]["trimmed_large"] >= 1


def test_decode_loop_exception_falls_back(tiny_model: Path) -> None:
    """ONNX Runtime raising inside a forward pass: the other model serves, counted."""
    from inference.engine import Engine, EngineConfig
    from inference.router import Task

    engine = Engine(
        EngineConfig(
            fast_dir=tiny_model / "fast", standard_dir=tiny_model / "standard", cache_dir=None
        )
    )
    fast = engine.load("fast")

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected: ORT kernel failure")

    # The ORT session itself fails (the fast model is a fused graph run through IOBinding).
    fast.runner.session.run_with_iobinding = explode  # type: ignore[method-assign]
    result = engine.generate(Task.COMPLETION, "def f(x):\n    return x", fast_mode=True)
    assert result.variant == "standard" and result.fallback
    stats = engine.stats()
    assert stats["events"]["failure.fast"] == 1
    assert stats["models"]["tiny-llama/fast"]["errors"] == 1


def test_a_bug_in_our_code_is_not_hidden_behind_the_other_model(tiny_model: Path) -> None:
    """An exception that is not the model's (here: in tokenizing) surfaces, trips no breaker."""
    from inference.engine import Engine, EngineConfig
    from inference.router import Task

    engine = Engine(
        EngineConfig(
            fast_dir=tiny_model / "fast", standard_dir=tiny_model / "standard", cache_dir=None
        )
    )
    fast = engine.load("fast")

    def broken_encode(*args: object, **kwargs: object) -> list[int]:
        raise TypeError("injected: a bug in our tokenizer wrapper")

    fast.tokenizer.encode = broken_encode  # type: ignore[method-assign]
    for _ in range(4):
        with pytest.raises(TypeError, match="injected"):
            engine.generate(Task.COMPLETION, "def f(x):\n    return x", fast_mode=True)
    stats = engine.stats()
    assert stats["breakers"]["fast"] == "closed" and "failure.fast" not in stats["events"]
