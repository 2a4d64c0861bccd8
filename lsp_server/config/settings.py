"""The `fastcomplete` settings section: defaults, parsing, and per-key validation.

Settings arrive from initializationOptions, workspace/configuration and didChangeConfiguration.
An invalid value is reported by key and the previous value kept; valid keys still apply.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from inference.manifest import FimTemplate
from inference.remote import RemoteConfig
from lsp_server.config.tuning import GATE_MIN_PROBABILITY, RETENTION_CHECKS_S

MULTILINE_MODES = ("auto", "always", "never")


@dataclass(frozen=True)
class Settings:
    fastMode: bool = True
    enable: bool = True
    languages: dict[str, bool] = field(default_factory=dict)  # languageId -> on/off; absent: on
    # languageId (or "*" for the others) -> where automatic suggestions stay away: "comment",
    # "string". Explicit requests still answer there.
    quietIn: dict[str, tuple[str, ...]] = field(default_factory=dict)
    maxTokens: int = 64
    multiline: str = "auto"
    debounceMs: int = 30
    contextTokens: int = 1536
    fastModelPath: str | None = None
    standardModelPath: str | None = None
    # An OpenAI-compatible server for explain/refactor (read at start-up): url, model,
    # apiKeyEnv (the NAME of an environment variable), timeoutMs, retries, dailyTokenQuota,
    # completions (also serve completions when fast mode is off).
    remote: dict[str, Any] | None = None
    debug: bool = False  # log prompts and completions (off: the log never holds code)
    # Answering before the model: a cold prompt answered from the nearest lines while the whole
    # one is prefilled (coldContext), the rest of a shown suggestion while it is typed
    # (typeThrough), and the suggestion after a shown one computed in idle time (prefetch).
    coldContext: bool = True
    typeThrough: bool = True
    prefetch: bool = True
    coldPrefillMs: int = 250  # the prefill a request may spend before it goes short
    # The rest of the repository in the prompt: snippets like the code at the cursor and the
    # definitions of names used there, from an index of the workspace (see lsp_server.workspace.index).
    workspaceIndex: bool = True
    # Rank automatic completions' candidates by the code after the cursor (an explicit request
    # always ranks its alternatives); costs two more short generations per request.
    suffixScoring: bool = False
    # Keep the identifier at the cursor on names that exist (the file's, the repository's, the
    # language's) while the model spells it (lsp_server.prompting.names).
    knownNames: bool = True
    # A suggestion passed over this many times at one place (shown, then the person asks
    # elsewhere without typing or accepting it) is held back there until the code around it
    # changes (0: never held back; lsp_server.inline.rejections).
    rejectAfterShows: int = 4
    # Quote the person's most recent edits (other files', or this one's outside the window) in
    # the prompt (lsp_server.workspace.recent_edits).
    recentEdits: bool = True
    # Hold back an automatic suggestion this person is unlikely to take: a small model learned
    # from their accepts and passes in this workspace gives it less than showGateThreshold
    # (lsp_server.inline.show_gate; stats' gate counts what it held back).
    showGate: bool = True
    showGateThreshold: float = GATE_MIN_PROBABILITY
    # When to look again at an accepted suggestion, counting how much of it the user kept
    # (stats' acceptance.retention; local only).
    retentionChecksS: tuple[int, ...] = RETENTION_CHECKS_S
    # Memory (read at start-up): the standard model (~0.5 GB) loads on first use (explain,
    # refactor, fast mode off, a fallback) unless preloaded; each model's KV cache is bounded.
    preloadStandard: bool = False
    kvCacheMB: int = 768
    # The editor offers to build a model that is not built (the VS Code extension does): the
    # server then says so in its status only, so the person sees one notification, the offer.
    offersModelBuild: bool = False

    def enabled_for(self, language_id: str) -> bool:
        return self.enable and self.languages.get(language_id, True)

    def quiet_in(self, language_id: str) -> frozenset[str]:
        """Where automatic suggestions stay away in this language: "comment", "string"."""
        return frozenset(self.quietIn.get(language_id, self.quietIn.get("*", ())))


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError("must be true or false")


def _int_in(low: int, high: int):
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be a whole number from {low} to {high}")
        if not low <= value <= high:
            raise ValueError(f"must be from {low} to {high}")
        return value

    return check


def _float_in(low: float, high: float):
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"must be a number from {low} to {high}")
        if not low <= value <= high:
            raise ValueError(f"must be from {low} to {high}")
        return float(value)

    return check


def _multiline(value: Any) -> str:
    if value not in MULTILINE_MODES:
        raise ValueError(f"must be one of {', '.join(MULTILINE_MODES)}")
    return value


def _languages(value: Any) -> dict[str, bool]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, bool) for k, v in value.items()
    ):
        raise ValueError('must map language ids to true/false, e.g. {"markdown": false}')
    return dict(value)


QUIET_PLACES = ("comment", "string")


def _quiet_in(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str)
        and isinstance(v, list)
        and all(isinstance(p, str) and p in QUIET_PLACES for p in v)
        for k, v in value.items()
    ):
        raise ValueError(
            'must map language ids (or "*") to lists of "comment" and "string", '
            'e.g. {"*": ["comment"], "markdown": []}'
        )
    return {k: tuple(dict.fromkeys(v)) for k, v in value.items()}


def _checks(value: Any) -> tuple[int, ...]:
    if (
        not isinstance(value, list)
        or not 1 <= len(value) <= 4
        or not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 3600 for v in value)
    ):
        raise ValueError("must be a list of 1 to 4 whole numbers of seconds, 1 to 3600")
    return tuple(sorted(set(value)))


def _path(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value):
        return value
    raise ValueError("must be a folder path or null")


REMOTE_KEYS = {
    "url": str,
    "model": str,
    "apiKeyEnv": str,
    "timeoutMs": int,
    "retries": int,
    "dailyTokenQuota": int,
    "completions": bool,
    "fim": dict,  # {prefix, suffix, middle}: the remote model's FIM tokens
}
FIM_KEYS = ("prefix", "suffix", "middle")


def _remote(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("must be an object with url and model")
    if "apiKey" in value:
        # Keys in settings files end up in dotfiles, backups and screenshots.
        raise ValueError("put the key in an environment variable and name it in remote.apiKeyEnv")
    for key, kind in REMOTE_KEYS.items():
        given = value.get(key)
        # bool is an int subclass: a number must not be accepted as a switch, nor the reverse.
        fits = isinstance(given, kind) and (kind is bool) == isinstance(given, bool)
        if key in value and not fits:
            raise ValueError(f"remote.{key} must be a {kind.__name__}")
    unknown = set(value) - REMOTE_KEYS.keys()
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    if not str(value.get("url", "")).startswith(("http://", "https://")):
        raise ValueError("remote.url must be an http:// or https:// URL")
    if not value.get("model"):
        raise ValueError("remote.model is required")
    fim = value.get("fim")
    if fim is not None and (
        set(fim) != set(FIM_KEYS) or not all(isinstance(fim[k], str) and fim[k] for k in FIM_KEYS)
    ):
        raise ValueError("remote.fim must be {prefix, suffix, middle}, each a non-empty string")
    return dict(value)


VALIDATORS = {
    "fastMode": _bool,
    "enable": _bool,
    "languages": _languages,
    "quietIn": _quiet_in,
    "maxTokens": _int_in(1, 512),
    "multiline": _multiline,
    "debounceMs": _int_in(0, 2000),
    "contextTokens": _int_in(64, 8192),
    "fastModelPath": _path,
    "standardModelPath": _path,
    "remote": _remote,
    "debug": _bool,
    "coldContext": _bool,
    "typeThrough": _bool,
    "prefetch": _bool,
    "coldPrefillMs": _int_in(10, 5000),
    "workspaceIndex": _bool,
    "suffixScoring": _bool,
    "knownNames": _bool,
    "recentEdits": _bool,
    "showGate": _bool,
    "showGateThreshold": _float_in(0.0, 1.0),
    "rejectAfterShows": _int_in(0, 100),
    "retentionChecksS": _checks,
    "preloadStandard": _bool,
    "offersModelBuild": _bool,
    "kvCacheMB": _int_in(64, 16384),
}


# Keys of the editor's `fastcomplete` section that the client itself uses: VS Code sends the
# whole section, and they are no concern of the server's.
CLIENT_KEYS = frozenset({"serverPath"})
# What a client says about itself in initializationOptions, not a setting a person changes.
CAPABILITY_KEYS = frozenset({"offersModelBuild"})


def merge(current: Settings, raw: Any) -> tuple[Settings, list[str]]:
    """Apply the valid keys of `raw` to `current`; one message per invalid or unknown key."""
    if raw is None:
        return current, []
    if isinstance(raw, dict) and isinstance(raw.get("fastcomplete"), dict):
        raw = raw["fastcomplete"]  # clients send either the section or the whole configuration
    if not isinstance(raw, dict):
        return current, [f"fastcomplete settings must be an object, got {type(raw).__name__}"]
    changes: dict[str, Any] = {}
    errors: list[str] = []
    for key, value in raw.items():
        check = VALIDATORS.get(key)
        if key in CLIENT_KEYS:
            continue
        if check is None:
            errors.append(f"fastcomplete.{key}: unknown setting (ignored)")
            continue
        try:
            changes[key] = check(value)
        except ValueError as exc:
            kept = getattr(current, key)
            errors.append(f"fastcomplete.{key}: {exc}; keeping {kept!r}")
    return dataclasses.replace(current, **changes), errors


def remote_config(raw: dict[str, Any] | None) -> RemoteConfig | None:
    if not raw:
        return None
    return RemoteConfig(
        url=raw["url"],
        model=raw["model"],
        api_key_env=raw.get("apiKeyEnv"),
        timeout_s=raw.get("timeoutMs", 20_000) / 1000,
        retries=raw.get("retries", 2),
        daily_token_quota=raw.get("dailyTokenQuota", 200_000),
        completions=raw.get("completions", False),
        fim=FimTemplate(**raw["fim"]) if raw.get("fim") else None,
    )
