"""The VS Code extension's settings schema (editors/vscode/package.json,
`contributes.configuration.properties`), generated from lsp_server.config.settings:
`python -m lsp_server.config.vscode_package` writes it, `--check` says whether it is current."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lsp_server.config.settings import CAPABILITY_KEYS, CLIENT_SETTINGS, default, specs


def _json(value: Any) -> Any:
    """A default as JSON has it (a tuple is a list)."""
    return json.loads(json.dumps(value))


def vscode_properties() -> dict[str, Any]:
    """`contributes.configuration.properties` of the VS Code extension's package.json."""
    properties = {f"fastcomplete.{key}": value for key, value in CLIENT_SETTINGS.items()}
    for key, spec in specs().items():
        if key in CAPABILITY_KEYS:
            continue
        told = "markdownDescription" if spec.markdown else "description"
        properties[f"fastcomplete.{key}"] = {
            **spec.schema,
            "default": _json(default(key)),
            told: spec.description,
        }
    return properties


def vscode_package(text: str) -> str:
    """The text of a package.json with its settings from here, the rest as it was."""
    package = json.loads(text)
    package["contributes"]["configuration"]["properties"] = vscode_properties()
    return json.dumps(package, indent=2, ensure_ascii=False) + "\n"


VSCODE_PACKAGE = Path(__file__).resolve().parents[2] / "editors" / "vscode" / "package.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsp_server.config.vscode_package",
        description="Write the settings, their defaults and ranges into the VS Code extension's "
        "package.json (contributes.configuration).",
    )
    parser.add_argument("package", nargs="?", type=Path, default=VSCODE_PACKAGE)
    parser.add_argument("--check", action="store_true", help="exit 1 if it is out of date")
    args = parser.parse_args(argv)
    text = args.package.read_text()
    wanted = vscode_package(text)
    if wanted == text:
        print(f"{args.package}: up to date")
        return 0
    if args.check:
        print(f"{args.package}: out of date; run {parser.prog}", file=sys.stderr)
        return 1
    args.package.write_text(wanted)
    print(f"{args.package}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
