#!/usr/bin/env bash
# Repositories for `fastcomplete eval --workspace`: code written after the model was trained, so it
# cannot have been memorised. Pinned versions from PyPI and npm, unpacked once under
# $FASTCOMPLETE_HOME/eval-repos (later runs reuse them). Prints the folders to evaluate.
set -euo pipefail
HOME_DIR="${FASTCOMPLETE_HOME:-$HOME/.cache/fastcomplete}"
DEST="$HOME_DIR/eval-repos"
PY_PKG="mcp==1.22.0"                       # the MCP Python SDK (first released Nov 2024)
NPM_PKG="@modelcontextprotocol/sdk@1.24.0" # its TypeScript SDK, shipped as compiled ES modules
PIP="${PIP:-.venv/bin/python -m pip}"
mkdir -p "$DEST"
if [ ! -d "$DEST/mcp-python/mcp" ]; then
  tmp=$(mktemp -d)
  $PIP download --quiet --no-deps "$PY_PKG" -d "$tmp" >&2
  mkdir -p "$DEST/mcp-python"
  (cd "$DEST/mcp-python" && python3 -m zipfile -e "$tmp"/*.whl . )
  rm -rf "$tmp"
fi
if [ ! -d "$DEST/mcp-js/esm" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$NPM_PKG" >/dev/null && tar xzf ./*.tgz)
  mkdir -p "$DEST/mcp-js"
  # Only the ES-module build: the CommonJS copy of the same code would leak every cut line.
  cp -r "$tmp/package/dist/esm" "$DEST/mcp-js/esm"
  rm -rf "$tmp"
fi
echo "$DEST/mcp-python/mcp"
echo "$DEST/mcp-js/esm"
