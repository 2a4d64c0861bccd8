"""The remote standard model: a real OpenAI-compatible server on loopback (`transformers serve`
with the same SmolLM2 weights), and injected faults from a loopback endpoint that misbehaves."""

from __future__ import annotations

import http.server
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference.engine import Engine, EngineConfig
from inference.generate import GenerationConfig
from inference.manifest import FimTemplate
from inference.remote import RemoteConfig
from inference.router import REMOTE, STANDARD, Task
from lsp_server.config.settings import Settings, merge, remote_config

CHAT = [{"role": "user", "content": "What does `len([1, 2, 3])` return?"}]
CONFIG = GenerationConfig(max_new_tokens=16)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _engine(tiny_model: Path, url: str, **remote: object) -> Engine:
    return Engine(
        EngineConfig(
            fast_dir=tiny_model / "fast",
            standard_dir=tiny_model / "standard",
            cache_dir=None,
            remote=RemoteConfig(url=url, model="smollm2", **{"timeout_s": 2.0, **remote}),
        )
    )


# -- a real OpenAI-compatible server ----------------------------------------------------------


@pytest.fixture(scope="module")
def transformers_server(real_model: Path) -> Iterator[str]:
    pytest.importorskip("fastapi")
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "transformers.commands.transformers_cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--device",
            "cpu",
            "--dtype",
            "float32",
            "--force_model",
            str(real_model / "hf"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("transformers serve did not come up")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # a generation thread that hangs keeps it alive
        proc.kill()


@pytest.mark.real_model
def test_explain_streams_from_a_real_openai_compatible_server(
    transformers_server: str,
    tiny_model: Path,
    real_model: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "sk-test-" + "9" * 24
    monkeypatch.setenv("FASTCOMPLETE_TEST_KEY", secret)
    caplog.set_level(logging.DEBUG)
    engine = Engine(
        EngineConfig(
            fast_dir=tiny_model / "fast",
            standard_dir=tiny_model / "standard",
            cache_dir=None,
            remote=RemoteConfig(
                url=transformers_server,
                model=str(real_model / "hf"),
                api_key_env="FASTCOMPLETE_TEST_KEY",
                timeout_s=60,
            ),
        )
    )
    seen: list[str] = []
    result = engine.generate(Task.EXPLAIN, "unused", CONFIG, messages=CHAT, on_text=seen.append)
    assert result.variant == REMOTE and not result.fallback
    assert result.text.strip() and len(seen) >= 2 and seen[-1] == result.text
    stats = engine.stats()
    assert stats["remote"]["tokens_today"] > 0 and stats["remote"]["requests"] == 1
    assert secret not in caplog.text


# -- injected faults -----------------------------------------------------------------------------


class Misbehaving(http.server.BaseHTTPRequestHandler):
    mode = "ok"
    hits = 0

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass

    def do_POST(self) -> None:
        type(self).hits += 1
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).requests = [*type(self).requests, (self.path, json.loads(body or b"{}"))]
        if self.mode == "500":
            self.send_error(500)
            return
        if self.mode == "slow":
            time.sleep(4)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if self.mode == "malformed":
            self.wfile.write(b"data: {not json\n\n")
            return
        for word in ("Hello", " from", " the", " remote"):
            chunk = {"choices": [{"delta": {"content": word}, "index": 0}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            if self.mode == "broken":
                self.connection.shutdown(socket.SHUT_RDWR)  # the stream dies mid-answer
                return
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def endpoint() -> Iterator[tuple[str, type[Misbehaving]]]:
    handler = type("Handler", (Misbehaving,), {"mode": "ok", "hits": 0, "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    server.shutdown()


def test_a_healthy_endpoint_is_used(endpoint, tiny_model: Path) -> None:
    url, _ = endpoint
    result = _engine(tiny_model, url).generate(Task.EXPLAIN, "x", CONFIG, messages=CHAT)
    assert (result.variant, result.text) == (REMOTE, "Hello from the remote")


@pytest.mark.parametrize("mode", ["500", "malformed", "broken", "slow"])
def test_faults_fall_back_to_the_local_standard_model(
    endpoint, tiny_model: Path, mode: str
) -> None:
    url, handler = endpoint
    handler.mode = mode
    engine = _engine(tiny_model, url, retries=1, backoff_s=0.01, timeout_s=1.0)
    started = time.monotonic()
    result = engine.generate(Task.EXPLAIN, "def f():", CONFIG, messages=CHAT)
    assert result.variant == STANDARD and result.fallback
    assert time.monotonic() - started < 15
    events = engine.stats()["events"]
    assert events["fallback.remote_to_standard"] == 1 and events["failure.remote"] == 1
    if mode in ("500", "slow"):
        assert handler.hits == 2  # retried once before giving up


def test_endpoint_down_and_circuit_breaker(tiny_model: Path) -> None:
    engine = _engine(tiny_model, f"http://127.0.0.1:{_free_port()}/v1", retries=0)
    for _ in range(4):
        assert engine.generate(Task.EXPLAIN, "x", CONFIG, messages=CHAT).variant == STANDARD
    stats = engine.stats()
    assert stats["breakers"][REMOTE] == "open"
    assert stats["events"]["failure.remote"] == 3  # the 4th request did not even try
    assert stats["events"]["breaker_open_skip.remote"] == 1


def test_daily_quota(endpoint, tiny_model: Path) -> None:
    url, _ = endpoint
    engine = _engine(tiny_model, url, daily_token_quota=3)
    assert engine.generate(Task.EXPLAIN, "x", CONFIG, messages=CHAT).variant == REMOTE
    second = engine.generate(Task.EXPLAIN, "x", CONFIG, messages=CHAT)
    assert second.variant == STANDARD and "quota" in second.fallback_reason
    assert engine.stats()["remote"]["tokens_today"] == 4


def test_completions_stay_local_unless_asked(endpoint, tiny_model: Path) -> None:
    url, handler = endpoint
    engine = _engine(tiny_model, url)
    assert engine.generate(Task.COMPLETION, "x = ", CONFIG, fast_mode=False).variant == STANDARD
    assert handler.hits == 0
    engine = _engine(tiny_model, url, completions=True)
    assert engine.generate(Task.COMPLETION, "x = ", CONFIG, fast_mode=False).variant == REMOTE
    # The server's own prompt as it is, to /completions: no chat template around it.
    path, body = handler.requests[-1]
    assert path == "/v1/completions" and body["prompt"] == "x = " and "messages" not in body
    one_line = GenerationConfig(max_new_tokens=8, stop_at_newline=True, deadline_s=1.5)
    engine.generate(Task.COMPLETION, "y = ", one_line, fast_mode=False)
    assert handler.requests[-1][1]["stop"] == ["\n"]
    engine.generate(Task.EXPLAIN, "x", CONFIG, messages=CHAT)
    assert handler.requests[-1][0] == "/v1/chat/completions"


def test_a_slow_remote_leaves_a_completion_half_its_deadline(endpoint, tiny_model: Path) -> None:
    url, handler = endpoint
    handler.mode = "slow"  # 4 s before the first byte
    engine = _engine(tiny_model, url, completions=True, timeout_s=20.0)
    one_line = GenerationConfig(max_new_tokens=8, stop_at_newline=True, deadline_s=1.5)
    started = time.monotonic()
    result = engine.generate(Task.COMPLETION, "x = ", one_line, fast_mode=False)
    assert result.variant != REMOTE and "remote" in result.fallback_reason
    assert handler.hits == 1  # no retry
    assert time.monotonic() - started < 3.5  # 0.75 s for the remote, then the local model


def test_a_down_remote_leaves_completions_to_the_fast_model_at_once(tiny_model: Path) -> None:
    engine = _engine(tiny_model, f"http://127.0.0.1:{_free_port()}/v1", completions=True)
    engine.load("fast")
    one_line = GenerationConfig(max_new_tokens=8, stop_at_newline=True, deadline_s=1.5)
    started = time.monotonic()
    result = engine.generate(Task.COMPLETION, "x = ", one_line, fast_mode=False)
    assert result.variant == "fast" or result.variant == STANDARD
    assert result.fallback and "remote" in result.fallback_reason
    assert time.monotonic() - started < 5  # no retries, no backoff for a keystroke


def test_remote_settings_are_validated() -> None:
    ok, errors = merge(Settings(), {"remote": {"url": "http://127.0.0.1:8000/v1", "model": "m"}})
    assert errors == [] and ok.remote == {"url": "http://127.0.0.1:8000/v1", "model": "m"}
    _, errors = merge(Settings(), {"remote": {"url": "http://x/v1", "model": "m", "apiKey": "sk"}})
    assert "environment variable" in errors[0]
    _, errors = merge(Settings(), {"remote": {"url": "ftp://x", "model": "m"}})
    assert "http" in errors[0]
    _, errors = merge(Settings(), {"remote": {"url": "http://x/v1", "model": "m", "retries": "2"}})
    assert "remote.retries must be a int" in errors[0]
    fim = {"prefix": "<fim_prefix>", "suffix": "<fim_suffix>", "middle": "<fim_middle>"}
    ok, errors = merge(Settings(), {"remote": {"url": "http://x/v1", "model": "m", "fim": fim}})
    assert errors == [] and remote_config(ok.remote).fim == FimTemplate(**fim)
    for bad in ({"prefix": "<p>"}, {**fim, "middle": ""}, {**fim, "extra": "x"}):
        kept, errors = merge(ok, {"remote": {"url": "http://x/v1", "model": "m", "fim": bad}})
        assert "remote.fim must be" in errors[0] and kept.remote == ok.remote
    kept, errors = merge(Settings(), {"kvCacheMB": 8, "preloadStandard": "yes"})
    assert len(errors) == 2 and (kept.kvCacheMB, kept.preloadStandard) == (768, False)
