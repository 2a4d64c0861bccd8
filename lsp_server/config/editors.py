"""The settings each editor sent last (secrets left out), kept under $FASTCOMPLETE_HOME for
`fastcomplete doctor`: the server writes them, the doctor reads them."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

EDITORS_FILE = "editors.json"  # under $FASTCOMPLETE_HOME: the settings each editor sent last
SECRET_WORDS = ("key", "token", "secret", "password")


def editors_path() -> Path:
    from inference.paths import fastcomplete_home

    return fastcomplete_home() / EDITORS_FILE


def read_editors() -> dict[str, Any]:
    try:
        data = json.loads(editors_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def record_editor(client: str, settings: dict[str, Any]) -> None:
    """Keep the settings `client` sent last (secrets left out) for `doctor`."""
    from inference.paths import ensure_private_dir

    kept = {k: v for k, v in settings.items() if not any(w in k.lower() for w in SECRET_WORDS)}
    if isinstance(kept.get("remote"), dict):
        remote = kept["remote"]
        kept["remote"] = {
            k: v for k, v in remote.items() if not any(w in k.lower() for w in SECRET_WORDS)
        }
    data = read_editors()
    data[client] = {
        "seen": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": kept,
    }
    path = editors_path()
    try:
        ensure_private_dir(path.parent)
        # Whole or not at all: several servers (one per editor window) write it.
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
        partial.replace(path)
    except OSError:
        pass  # only for `doctor`: a read-only home must not stop the server
