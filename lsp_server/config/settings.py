"""The `fastcomplete` settings section: each setting's default, type, range and description in one
place, the fields of `Settings`. From them come the server's per-key validation and the VS Code
extension's settings (editors/vscode/package.json, `contributes.configuration`), written by
`python -m lsp_server.config.vscode_package` (tests/test_settings.py fails when it is out of
date).

Settings arrive from initializationOptions, workspace/configuration and didChangeConfiguration.
An invalid value is reported by key and the previous value kept; valid keys still apply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from inference.manifest import FimTemplate
from inference.remote import RemoteConfig
from inference.tuning import KV_CACHE_BYTES, MAX_NEW_TOKENS
from lsp_server.config.tuning import GATE_MIN_PROBABILITY, RETENTION_CHECKS_S

MULTILINE_MODES = ("auto", "always", "never")
QUIET_PLACES = ("comment", "string")
RETENTION_CHECKS_ITEMS = (1, 4)  # how many checks, at least and at most
RETENTION_CHECK_S = (1, 3600)  # each one's seconds after the accept, at least and at most


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError("must be true or false")


def _int_in(low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be a whole number from {low} to {high}")
        if not low <= value <= high:
            raise ValueError(f"must be from {low} to {high}")
        return value

    return check


def _float_in(low: float, high: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"must be a number from {low} to {high}")
        if not low <= value <= high:
            raise ValueError(f"must be from {low} to {high}")
        return float(value)

    return check


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return check


def _languages(value: Any) -> dict[str, bool]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, bool) for k, v in value.items()
    ):
        raise ValueError('must map language ids to true/false, e.g. {"markdown": false}')
    return dict(value)


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
    (fewest, most), (low, high) = RETENTION_CHECKS_ITEMS, RETENTION_CHECK_S
    if (
        not isinstance(value, list)
        or not fewest <= len(value) <= most
        or not all(
            isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in value
        )
    ):
        raise ValueError(
            f"must be a list of {fewest} to {most} whole numbers of seconds, {low} to {high}"
        )
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


@dataclass(frozen=True)
class Spec:
    """What one setting accepts: the server checks a value with it, and an editor's settings UI
    offers the setting from it (the default is the field's own)."""

    check: Callable[[Any], Any]  # the value as sent -> as kept; ValueError says what is wrong
    schema: dict[str, Any]  # its values' JSON schema, as VS Code's package.json declares them
    description: str  # for the person who changes it
    markdown: bool = False  # the description is markdown (VS Code renders its `code`)


SPEC = "spec"  # the key of each Settings field's Spec in its metadata


def setting(default: Any, spec: Spec) -> Any:
    """A Settings field of an immutable default: the default and its Spec."""
    return field(default=default, metadata={SPEC: spec})


def switch(default: bool, description: str) -> Any:
    return setting(default, Spec(_bool, {"type": "boolean"}, description))


def whole(default: int, low: int, high: int, description: str) -> Any:
    schema = {"type": "integer", "minimum": low, "maximum": high}
    return setting(default, Spec(_int_in(low, high), schema, description))


def number(default: float, low: float, high: float, description: str) -> Any:
    schema = {"type": "number", "minimum": low, "maximum": high}
    return setting(default, Spec(_float_in(low, high), schema, description))


def one_of(default: str, choices: tuple[str, ...], description: str) -> Any:
    schema = {"type": "string", "enum": list(choices)}
    return setting(default, Spec(_one_of(choices), schema, description))


def folder(description: str) -> Any:
    return setting(None, Spec(_path, {"type": ["string", "null"]}, description))


@dataclass(frozen=True)
class Settings:
    fastMode: bool = switch(
        True, "Complete with the fast INT8 model; off: the full-precision standard model."
    )
    enable: bool = switch(True, "Inline completions on or off.")
    # languageId -> on/off; absent: on
    languages: dict[str, bool] = field(
        default_factory=dict,
        metadata={
            SPEC: Spec(
                _languages,
                {"type": "object", "additionalProperties": {"type": "boolean"}},
                'Per-language switch, e.g. {"markdown": false}.',
            )
        },
    )
    # languageId (or "*" for the others) -> where automatic suggestions stay away.
    quietIn: dict[str, tuple[str, ...]] = field(
        default_factory=dict,
        metadata={
            SPEC: Spec(
                _quiet_in,
                {
                    "type": "object",
                    "additionalProperties": {
                        "type": "array",
                        "items": {"type": "string", "enum": list(QUIET_PLACES)},
                        "uniqueItems": True,
                    },
                },
                "Where automatic suggestions stay away, per language id or `*` for the "
                'others: `comment` and/or `string`, e.g. `{"*": ["comment"], "markdown": []}`. '
                "Asking for a suggestion (Invoke) still answers there.",
                markdown=True,
            )
        },
    )
    maxTokens: int = whole(MAX_NEW_TOKENS, 1, 512, "Most tokens one completion may have.")
    multiline: str = one_of(
        "auto",
        MULTILINE_MODES,
        "auto: the rest of the line mid-line; at a line's end its rest, or the next line where"
        " the line is done; a block after a block opener. never: the cursor's line only.",
    )
    debounceMs: int = whole(30, 0, 2000, "Server-side wait before a completion starts.")
    contextTokens: int = whole(1536, 64, 8192, "Prompt budget in tokens.")
    fastModelPath: str | None = folder(
        "The fast model's folder; default: the one `fastcomplete models build` made."
    )
    standardModelPath: str | None = folder(
        "The standard model's folder; default: the one `fastcomplete models build` made."
    )
    # Read at start-up; its keys are REMOTE_KEYS, turned into an inference RemoteConfig by
    # remote_config().
    remote: dict[str, Any] | None = field(
        default=None,
        metadata={
            SPEC: Spec(
                _remote,
                {"type": ["object", "null"]},
                "An OpenAI-compatible server for explain/refactor (read at start-up): `url`, "
                "`model`, `apiKeyEnv` (the NAME of an environment variable holding the key), "
                "`timeoutMs`, `retries`, `dailyTokenQuota`, `completions` (also serve completions "
                "when fast mode is off), `fim`. Nothing leaves the machine without it.",
                markdown=True,
            )
        },
    )
    # Off, the log never holds code.
    debug: bool = switch(False, "Log each completion's decisions to the server's output channel.")
    # Answering before the model (lsp_server.inline): a cold prompt from the nearest lines, the
    # rest of a shown suggestion while it is typed, the next suggestion in idle time.
    coldContext: bool = switch(
        True, "Answer a cold prompt from the nearest lines while the whole one is prefilled."
    )
    typeThrough: bool = switch(
        True, "Keep showing the rest of a suggestion while it is typed, without a model run."
    )
    prefetch: bool = switch(True, "Compute the suggestion after a shown one in idle time.")
    coldPrefillMs: int = whole(
        250,
        10,
        5000,
        "The prefill a request may spend before it is answered from the nearest lines "
        "(coldContext).",
    )
    # A person at rest (the document unchanged for T_REST_S) is asking for a good suggestion more
    # than a quick one: the whole prompt's prefill under way is waited for this long.
    restPrefillMs: int = whole(
        1500,
        0,
        10000,
        "At rest (the document unchanged for a second), the prefill a request may spend on the "
        "whole prompt before it is answered from the nearest lines (coldContext).",
    )
    # See lsp_server.workspace.index.
    workspaceIndex: bool = switch(
        True, "Index the workspace for snippets and definitions in the prompt."
    )
    # An explicit request always ranks its alternatives.
    suffixScoring: bool = switch(
        False,
        "Rank automatic completions' candidates by the code after the cursor (two more short "
        "generations per request).",
    )
    # See lsp_server.prompting.names.
    knownNames: bool = switch(
        True,
        "Where the cursor ends an identifier, keep the suggestion's name on names that exist in "
        "the file, the workspace and the language.",
    )
    # See lsp_server.inline.rejections.
    rejectAfterShows: int = whole(
        4,
        0,
        100,
        "A suggestion passed over this many times at one place (shown, then you work elsewhere "
        "without taking it) is held back there until the code around it changes (0: never).",
    )
    # See lsp_server.workspace.recent_edits.
    recentEdits: bool = switch(
        True,
        "Quote your most recent edits (in other files, or far from the cursor) in the prompt, "
        "and nudge a suggestion toward the names they brought in.",
    )
    # See lsp_server.inline.show_gate; stats' gate counts what it held back.
    showGate: bool = switch(
        True,
        "Hold back automatic suggestions you are unlikely to take, judged by a small model "
        "learned on this machine from what you took and passed over in this workspace.",
    )
    showGateThreshold: float = number(
        GATE_MIN_PROBABILITY,
        0.0,
        1.0,
        "The show gate holds back a suggestion it gives less than this chance of being taken "
        "(0: shows everything, still learning).",
    )
    retentionChecksS: tuple[int, ...] = setting(
        RETENTION_CHECKS_S,
        Spec(
            _checks,
            {
                "type": "array",
                "items": {
                    "type": "integer",
                    "minimum": RETENTION_CHECK_S[0],
                    "maximum": RETENTION_CHECK_S[1],
                },
                "minItems": RETENTION_CHECKS_ITEMS[0],
                "maxItems": RETENTION_CHECKS_ITEMS[1],
            },
            "Seconds after an accept at which the server measures how much of the accepted text "
            "is still in the file (Show Stats: acceptance.retention). Counted locally; nothing "
            "leaves the machine.",
        ),
    )
    # Memory: the standard model (~0.5 GB) loads on first use (explain, refactor, fast mode
    # off, a fallback) unless preloaded.
    preloadStandard: bool = switch(
        False,
        "Load the standard model at start-up instead of on first use (read at start-up).",
    )
    kvCacheMB: int = whole(
        KV_CACHE_BYTES >> 20,
        64,
        16384,
        "Each model's KV cache budget in MB (read at start-up).",
    )
    # The editor offers to build a model that is not built (the VS Code extension does): the
    # server then says so in its status only, so the person sees one notification, the offer.
    offersModelBuild: bool = switch(
        False, "The editor offers to build a missing model itself (the server only reports it)."
    )

    def enabled_for(self, language_id: str) -> bool:
        return self.enable and self.languages.get(language_id, True)

    def quiet_in(self, language_id: str) -> frozenset[str]:
        """Where automatic suggestions stay away in this language: "comment", "string"."""
        return frozenset(self.quietIn.get(language_id, self.quietIn.get("*", ())))


def specs() -> dict[str, Spec]:
    return {f.name: f.metadata[SPEC] for f in dataclasses.fields(Settings)}


def default(key: str) -> Any:
    """A setting's default, as Settings() has it."""
    return getattr(Settings(), key)


VALIDATORS = {key: spec.check for key, spec in specs().items()}


# Settings of the editor's `fastcomplete` section that the VS Code extension itself uses: VS Code
# sends the whole section, and they are no concern of the server's.
CLIENT_SETTINGS: dict[str, dict[str, Any]] = {
    "serverPath": {
        "type": "string",
        "default": "fastcomplete",
        "description": "The fastcomplete executable (a path, or a name on PATH).",
    },
}
CLIENT_KEYS = frozenset(CLIENT_SETTINGS)
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
    # Only what the settings give: RemoteConfig holds the defaults of the rest.
    given: dict[str, Any] = {}
    if "apiKeyEnv" in raw:
        given["api_key_env"] = raw["apiKeyEnv"]
    if "timeoutMs" in raw:
        given["timeout_s"] = raw["timeoutMs"] / 1000
    if "retries" in raw:
        given["retries"] = raw["retries"]
    if "dailyTokenQuota" in raw:
        given["daily_token_quota"] = raw["dailyTokenQuota"]
    if "completions" in raw:
        given["completions"] = raw["completions"]
    if raw.get("fim"):
        given["fim"] = FimTemplate(**raw["fim"])
    return RemoteConfig(url=raw["url"], model=raw["model"], **given)
