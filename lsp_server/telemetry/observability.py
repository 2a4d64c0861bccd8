"""Structured logs to a rotating file, and Prometheus metrics on a port the user opens.

Logs are JSON lines under $FASTCOMPLETE_HOME/logs (private to the user). They carry events and
counts, never code: prompts and completions are logged only with the `debug` setting on.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inference.paths import ensure_private_dir, fastcomplete_home
from lsp_server.config.tuning import LOG_BACKUP_FILES, LOG_BYTES

TIME_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def setup_logging(verbose: bool, log_file: Path | None = None) -> Path:
    """Plain text to stderr (the editor's log), JSON lines to a rotating file. Returns the file."""
    path = log_file or fastcomplete_home() / "logs" / "server.log"
    ensure_private_dir(path.parent)
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    rotating = logging.handlers.RotatingFileHandler(
        path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUP_FILES, encoding="utf-8"
    )
    rotating.setFormatter(JsonLines())
    root.handlers = [stderr, rotating]
    if not verbose:
        # pygls logs every message body at INFO: that would put users' code in the log.
        logging.getLogger("pygls").setLevel(logging.WARNING)
    return path


class PrometheusExporter:
    """TTFT/TPOT histograms and request, error, cancel, fallback counters per model."""

    def __init__(self, server_counts: Callable[[], dict[str, int]]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram
        from prometheus_client.core import CounterMetricFamily

        self.registry = CollectorRegistry()
        self.ttft = Histogram(
            "fastcomplete_ttft_seconds",
            "Time to first token",
            ["model"],
            buckets=TIME_BUCKETS,
            registry=self.registry,
        )
        self.tpot = Histogram(
            "fastcomplete_tpot_seconds",
            "Time per output token",
            ["model"],
            buckets=TIME_BUCKETS,
            registry=self.registry,
        )
        self.model_counts = Counter(
            "fastcomplete_model_events",
            "Requests, errors, cancels, timeouts, cache hits",
            ["model", "kind"],
            registry=self.registry,
        )
        self.routing = Counter(
            "fastcomplete_routing_events",
            "Routes, fallbacks, failures, breaker trips",
            ["event"],
            registry=self.registry,
        )

        class ServerCounts:
            def collect(self) -> Any:
                family = CounterMetricFamily(
                    "fastcomplete_server_events", "LSP request outcomes", labels=["kind"]
                )
                for kind, value in server_counts().items():
                    family.add_metric([kind], value)
                yield family

        self.registry.register(ServerCounts())
        self._lock = threading.Lock()

    def observe(self, kind: str, model: str, key: str, value: float) -> None:
        with self._lock:
            if kind == "ttft":
                self.ttft.labels(model).observe(value)
            elif kind == "tpot":
                self.tpot.labels(model).observe(value)
            elif kind == "count" and key in {
                "requests",
                "errors",
                "cancels",
                "timeouts",
                "cache_hits",
            }:
                self.model_counts.labels(model, key).inc(value)
            elif kind == "event":
                self.routing.labels(key).inc(value)

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        from prometheus_client import start_http_server

        start_http_server(port, addr=host, registry=self.registry)
