#!/usr/bin/env bash
# The GPU default with its real weights on a lent GPU (bench/gpu_real.py says how):
#   bash bench/gpu_real.sh prepare                      # here: wheels, GGUF, repos in <= 60 MiB pieces
#   bash bench/gpu_real.sh run --carry DIR --out DIR    # there, after carrying the pieces
#   bash bench/gpu_real.sh run --dry-run                # checks every step's command line
# Here it runs in the project's .venv; on the lent machine (no .venv) in its own python3.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${GPU_PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
exec "$py" -m bench.gpu_real "$@"
