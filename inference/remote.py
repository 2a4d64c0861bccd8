"""A remote standard model: any OpenAI-compatible server (vLLM, TGI, llama.cpp's server, Ollama,
`transformers serve`), spoken to with the standard library only.

Streaming chat completions (`/chat/completions`, for explain and refactor) and raw-prompt
completions (`/completions`, for code completion: the server's own prompt, FIM form when the
remote model's template is configured), as server-sent events, with a cancel flag checked per
chunk (the connection is closed, which stops the generation on vLLM and its peers), timeouts,
retries with exponential backoff before any text has arrived, and a daily token quota. The API
key is read from the environment variable the settings name and never appears in a message or a
log.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

from inference.errors import ModelFailure
from inference.generate import Finish, GenerationConfig
from inference.manifest import FimTemplate


class RemoteError(ModelFailure):
    """The remote endpoint failed: down, slow, an error status, or a malformed answer."""


class QuotaExceeded(RemoteError):
    """Today's remote token quota is used up."""


@dataclass(frozen=True)
class RemoteConfig:
    url: str  # the API base, e.g. http://127.0.0.1:8000/v1
    model: str
    api_key_env: str | None = None  # the NAME of the variable holding the key, never the key
    timeout_s: float = 20.0
    retries: int = 2
    backoff_s: float = 0.25
    daily_token_quota: int = 200_000
    completions: bool = False  # also serve completions (otherwise explain/refactor only)
    fim: FimTemplate | None = None  # the remote model's fill-in-the-middle tokens, if it has them


@dataclass
class RemoteResult:
    text: str
    finish: Finish
    completion_tokens: int
    total_s: float
    ttft_s: float | None


@dataclass
class Usage:
    day: str = field(default_factory=lambda: date.today().isoformat())
    tokens: int = 0
    requests: int = 0
    failures: int = 0


class RemoteModel:
    def __init__(self, config: RemoteConfig) -> None:
        if not config.url.startswith(("http://", "https://")):
            raise ValueError(f"remote.url must start with http:// or https://, got {config.url!r}")
        self.config = config
        self.usage = Usage()
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"remote/{self.config.model}"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        env = self.config.api_key_env
        key = os.environ.get(env) if env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _spend(self, tokens: int) -> None:
        with self._lock:
            today = date.today().isoformat()
            if self.usage.day != today:
                self.usage = Usage(day=today)
            self.usage.tokens += tokens

    def _check_quota(self) -> None:
        with self._lock:
            if self.usage.day == date.today().isoformat() and (
                self.usage.tokens >= self.config.daily_token_quota
            ):
                raise QuotaExceeded(
                    f"remote token quota for today used up ({self.usage.tokens} tokens)"
                )

    def generate(
        self,
        messages: list[dict[str, str]],
        config: GenerationConfig,
        cancel: threading.Event,
        on_text: Callable[[str], None] | None = None,
    ) -> RemoteResult:
        """Stream one chat completion; retries only while nothing has been received yet."""
        return self._request(
            "/chat/completions",
            {"messages": messages},
            config,
            cancel,
            on_text,
            self.config.retries,
        )

    def complete(
        self,
        prompt: str,
        config: GenerationConfig,
        cancel: threading.Event,
        on_text: Callable[[str], None] | None = None,
    ) -> RemoteResult:
        """Stream one completion of a raw prompt (`/completions`), as code completion needs: the
        prompt is sent as it is, no chat template around it. A keystroke cannot wait for
        retries: no retry, and half the completion's deadline, so that a slow or down remote
        leaves the local fast model (the route's fallback) the other half."""
        if config.deadline_s:
            config = replace(config, deadline_s=config.deadline_s / 2)
        return self._request("/completions", {"prompt": prompt}, config, cancel, on_text, 0)

    def _request(
        self,
        path: str,
        payload: dict[str, Any],
        config: GenerationConfig,
        cancel: threading.Event,
        on_text: Callable[[str], None] | None,
        retries: int,
    ) -> RemoteResult:
        self._check_quota()
        body = {
            "model": self.config.model,
            **payload,
            "max_tokens": config.max_new_tokens,
            "temperature": config.temperature,
            "stream": True,
        }
        stops = list(config.stop_strings) + (["\n"] if _one_line(config) else [])
        if stops:
            body["stop"] = stops[:4]
        attempt, last = 0, None
        while attempt <= retries:
            if cancel.is_set():
                return RemoteResult("", Finish.CANCELLED, 0, 0.0, None)
            try:
                result = self._stream(path, body, config, cancel, on_text)
                with self._lock:
                    self.usage.requests += 1
                self._spend(result.completion_tokens)
                return result
            except _Retryable as exc:
                last = exc.error
                attempt += 1
                with self._lock:
                    self.usage.failures += 1
                time.sleep(self.config.backoff_s * (2 ** (attempt - 1)))
        raise last or RemoteError("remote endpoint failed")

    def _stream(
        self,
        path: str,
        body: dict[str, Any],
        config: GenerationConfig,
        cancel: threading.Event,
        on_text: Callable[[str], None] | None,
    ) -> RemoteResult:
        received = _Received(time.perf_counter())
        with self._post(path, body, config) as response:
            try:
                for raw in response:
                    interrupted = _interruption(config, cancel, received.started)
                    if interrupted is not None:
                        return received.result(interrupted)
                    payload = _event_data(raw)
                    if payload == "[DONE]":
                        received.complete = True
                        break
                    if payload is not None:
                        received.add(_parse_chunk(payload), on_text)
            except (TimeoutError, ConnectionError, OSError) as exc:
                raise _broken(received.text, exc) from exc
        if not received.complete:
            # A server that dies mid-answer closes the socket: iteration just ends.
            raise RemoteError(f"remote stream ended early after {len(received.text)} characters")
        received.cut_at_stops(config)
        return received.result()

    def _post(
        self, path: str, body: dict[str, Any], config: GenerationConfig
    ) -> http.client.HTTPResponse:
        """The open response to `body`; a failure worth retrying (unreachable, overloaded, a
        server error) raises _Retryable."""
        url = self.config.url.rstrip("/") + path
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers=self._headers(), method="POST"
        )
        timeout = min(self.config.timeout_s, config.deadline_s or self.config.timeout_s)
        try:
            return urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as exc:
            error = RemoteError(f"remote endpoint answered HTTP {exc.code}")
            raise _Retryable(error) if exc.code >= 500 or exc.code == 429 else error from exc
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise _Retryable(RemoteError(f"remote endpoint unreachable ({reason})")) from exc


@dataclass
class _Received:
    """What a streamed answer has brought so far."""

    started: float  # time.perf_counter() when the request was made
    text: str = ""
    ttft_s: float | None = None
    tokens: int = 0
    finish: Finish = Finish.LENGTH
    complete: bool = False  # the server said the answer is over

    def add(self, chunk: dict[str, Any], on_text: Callable[[str], None] | None) -> None:
        choice = (chunk.get("choices") or [{}])[0]
        piece = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
        if piece:
            if self.ttft_s is None:
                self.ttft_s = time.perf_counter() - self.started
            self.text += piece
            self.tokens += 1
            if on_text:
                on_text(self.text)
        reason = choice.get("finish_reason")
        if reason:
            self.complete = True
            self.finish = Finish.EOS if reason == "stop" else Finish.LENGTH
        usage = chunk.get("usage") or {}
        self.tokens = int(usage.get("completion_tokens", self.tokens))

    def cut_at_stops(self, config: GenerationConfig) -> None:
        """A server may ignore `stop`, or see more than 4 of them: the text ends at each here."""
        for stop in (*config.stop_strings, *(["\n"] if _one_line(config) else [])):
            if stop in self.text:
                self.text, self.finish = self.text[: self.text.index(stop)], Finish.STOP

    def result(self, finish: Finish | None = None) -> RemoteResult:
        total_s = time.perf_counter() - self.started
        finish = self.finish if finish is None else finish
        return RemoteResult(self.text, finish, self.tokens, total_s, self.ttft_s)


def _interruption(
    config: GenerationConfig, cancel: threading.Event, started: float
) -> Finish | None:
    """Why reading stops before the answer's end: cancelled, or past the deadline."""
    if cancel.is_set():
        return Finish.CANCELLED
    if config.deadline_s and time.perf_counter() - started > config.deadline_s:
        return Finish.DEADLINE
    return None


def _event_data(raw: bytes) -> str | None:
    """The data of a server-sent event's `data:` line; None for any other line."""
    line = raw.decode("utf-8", "replace").strip()
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


def _broken(text: str, exc: Exception) -> Exception:
    """A stream that broke: worth retrying only while no text has arrived (none was shown)."""
    if not text:
        return _Retryable(RemoteError(f"remote stream broke ({exc})"))
    return RemoteError(f"remote stream broke after {len(text)} characters ({exc})")


def _one_line(config: GenerationConfig) -> bool:
    """Stop at the first line break (a next-line completion's leading breaks are its text)."""
    return config.stop_at_newline and not config.next_line


class _Retryable(Exception):
    def __init__(self, error: RemoteError) -> None:
        super().__init__(str(error))
        self.error = error


def _parse_chunk(payload: str) -> dict[str, Any]:
    try:
        chunk = json.loads(payload)
    except ValueError as exc:
        raise RemoteError(f"remote endpoint sent malformed JSON ({payload[:60]!r})") from exc
    if not isinstance(chunk, dict):
        raise RemoteError("remote endpoint sent a chunk that is not a JSON object")
    return chunk
