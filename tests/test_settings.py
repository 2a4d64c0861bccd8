"""Each setting's default, type, range and description live in lsp_server/config/settings.py only:
what the editors and the docs say of them is generated from it or checked against it here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from inference.remote import RemoteConfig
from lsp_server.config.settings import (
    CAPABILITY_KEYS,
    CLIENT_KEYS,
    VALIDATORS,
    Settings,
    default,
    merge,
    remote_config,
    specs,
)
from lsp_server.config.vscode_package import VSCODE_PACKAGE, vscode_package, vscode_properties

REPO = Path(__file__).resolve().parent.parent
REGENERATE = "run `python -m lsp_server.config.vscode_package` to write it from lsp_server/config/settings.py"
NVIM_PLUGIN = REPO / "editors" / "nvim" / "lua" / "fastcomplete" / "init.lua"
# A docs table's row for one setting: | `key` | `default` | what it does |
DOC_ROW = re.compile(r"^\| `(\w+)` \| `([^`]*)` \|(.*)\|$", re.M)
DOC_RANGE = re.compile(r"\((-?[\d.]+)-(-?[\d.]+)[;)]")


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_the_vscode_settings_are_the_servers_value_by_value() -> None:
    """editors/vscode/package.json declares every setting with the default, type, range, choices
    and description settings.py gives it, and is the file the generator writes."""
    text = VSCODE_PACKAGE.read_text()
    declared = json.loads(text)["contributes"]["configuration"]["properties"]
    wanted = vscode_properties()
    for key in sorted(wanted.keys() | declared.keys()):
        assert declared.get(key) == wanted.get(key), f"{key} in package.json: {REGENERATE}"
    assert text == vscode_package(text), f"package.json: {REGENERATE}"


def test_every_server_setting_is_declared_by_the_vscode_extension() -> None:
    """A setting the server reads is one a VS Code user can find in the Settings UI (and the
    Neovim plugin passes its `settings` table through as it is)."""
    keys = {k.removeprefix("fastcomplete.") for k in vscode_properties()}
    assert set(VALIDATORS) - keys == CAPABILITY_KEYS
    assert keys - set(VALIDATORS) == CLIENT_KEYS


def test_every_default_is_a_value_the_server_accepts() -> None:
    for key in VALIDATORS:
        kept, errors = merge(Settings(), {key: as_json(default(key))})
        assert errors == [] and getattr(kept, key) == default(key), key


@pytest.mark.parametrize("key", sorted(specs()))
def test_the_schemas_bounds_are_the_checks_bounds(key: str) -> None:
    """What VS Code's Settings UI allows is what the server accepts, at each end of a range."""
    spec = specs()[key]
    schema, check = spec.schema, spec.check
    if schema["type"] == "array":  # retentionChecksS: a list of whole numbers
        first = default(key)[0]
        spec.check([first] * schema["minItems"])
        spec.check([first] * schema["maxItems"])  # repeats are merged, not refused
        with pytest.raises(ValueError):
            spec.check([first + i for i in range(schema["maxItems"] + 1)])
        schema = schema["items"]

        def check(item: Any) -> Any:
            return spec.check([item])

    if "minimum" in schema:
        low, high = schema["minimum"], schema["maximum"]
        step = 1 if schema["type"] == "integer" else 0.001
        assert check(low) is not None and check(high) is not None
        for outside in (low - step, high + step):
            with pytest.raises(ValueError):
                check(outside)
    for choice in schema.get("enum", ()):
        assert check(choice) == choice
    if "enum" in schema:
        with pytest.raises(ValueError):
            check("none of them")


def test_the_neovim_plugin_repeats_no_server_default() -> None:
    """The plugin sends only what the person set (`settings = {}`); where it needs a setting's
    value before the server answers, it assumes the server's default."""
    lua = NVIM_PLUGIN.read_text()
    assert re.search(r"^\s*settings = \{\},", lua, re.M)
    assumed = re.findall(r"config\.settings\.(\w+) ~= (true|false)", lua)
    assert assumed, "the plugin no longer reads a setting before the server answers"
    for key, value in assumed:
        # `x ~= false` is true when x is unset: the plugin assumes the default is true.
        assert default(key) is (value == "false"), key


@pytest.mark.parametrize("page", ["README.md", "docs/language-server.md"])
def test_the_docs_tables_give_the_servers_defaults_and_ranges(page: str) -> None:
    rows = DOC_ROW.findall((REPO / page).read_text())
    checked = [key for key, _, _ in rows if key in VALIDATORS]
    assert checked, f"{page}: no settings table found"
    for key, shown, meaning in rows:
        if key not in VALIDATORS:
            continue
        value = default(key)
        assert (shown if isinstance(value, str) else json.loads(shown)) == as_json(value), (
            f"{page}: {key}'s default"
        )
        schema = specs()[key].schema
        found = DOC_RANGE.search(meaning)
        if found and "minimum" in schema:
            shown_range = tuple(float(v) for v in found.groups())
            assert shown_range == (schema["minimum"], schema["maximum"]), f"{page}: {key}'s range"


def test_the_remote_setting_leaves_the_engines_defaults_to_the_engine() -> None:
    url, model = "http://127.0.0.1:8000/v1", "m"
    assert remote_config({"url": url, "model": model}) == RemoteConfig(url, model)
    given = remote_config({"url": url, "model": model, "timeoutMs": 5000, "retries": 0})
    assert given == RemoteConfig(url, model, timeout_s=5.0, retries=0)
