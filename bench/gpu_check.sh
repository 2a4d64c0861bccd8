#!/usr/bin/env bash
# The CUDA path in one prepared run, for a machine with an NVIDIA GPU:
#   bash bench/gpu_check.sh            # exits 2 at once, saying so, where there is no GPU
# 1. no GPU -> say so, exit 2 (before installing anything);
# 2. the project's venv (make install; or $GPU_PYTHON, a python that already has the project's
#    runtime dependencies, e.g. on a machine that reaches no registry) and onnxruntime-gpu's
#    CUDA 13 / cuDNN 9 libraries from PyPI (its `cuda,cudnn` extras: the nvidia-* wheels) or,
#    offline, from wheels in $GPU_WHEELS;
# 3. the models: onnxruntime-genai's CUDA graphs (FP16 standard model, 8-bit fast model), built
#    with `fastcomplete models build --cuda` unless $FASTCOMPLETE_HOME has them;
# 4. bench/gpu_check.py: providers per session, nodes per provider (no compute node silently on
#    the CPU), the KV buffers' device (IOBinding), prefill and decode at 256/1024/4096;
# 5. the typing benchmark (p50/p95 as an editor sees them), on the GPU.
# Output also lands in $GPU_CHECK_OUT (default build/gpu_check/).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${GPU_CHECK_OUT:-build/gpu_check}
mkdir -p "$out"

if ! { [ -e /dev/nvidiactl ] || [ -e /dev/nvidia0 ]; }; then
  echo "gpu_check: no NVIDIA GPU on this machine (no /dev/nvidiactl or /dev/nvidia0): nothing to check" >&2
  exit 2
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"

if [ -n "${GPU_PYTHON:-}" ]; then
  py=$GPU_PYTHON
else
  make install >/dev/null
  py=.venv/bin/python
fi
ort_version=$(grep -o 'onnxruntime-gpu==[0-9.]*' pyproject.toml | cut -d= -f3)
if [ -n "${GPU_WHEELS:-}" ]; then
  $py -m pip install --quiet --no-index --find-links "$GPU_WHEELS" "onnxruntime-gpu[cuda,cudnn]==$ort_version"
else
  $py -m pip install --quiet "onnxruntime-gpu[cuda,cudnn]==$ort_version"
fi
$py -c 'import onnxruntime as ort; ort.preload_dlls(); print("onnxruntime", ort.__version__, ort.get_available_providers())'

$py -m lsp_server.cli models build --cuda
PYTHONUNBUFFERED=1 $py -m bench.gpu_check --json "$out/gpu_check.json" 2>&1 | tee "$out/gpu_check.txt"
PYTHONUNBUFFERED=1 $py -m bench.typing_replay --json "$out/typing.json" 2>&1 | tee "$out/typing.txt"
echo "gpu_check: done; output in $out"
