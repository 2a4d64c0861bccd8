"""Every tunable of the engine, in one table, each with its unit in its name (`_S` seconds,
`_MS` milliseconds, `_TOKENS`, `_CHARS`, `_BYTES`, `_ITEMS`, ...), as llama.vim keeps its
defaults. The server's own live in lsp_server/config/tuning.py; these are the numbers behind the
engine, measured on this project's benchmarks (see docs/ for each)."""

from __future__ import annotations

# -- Engine ------------------------------------------------------------------------------------

# The GPU default (models/choice.py): the best model whose first suggestion, measured on
# the GPU, has a p95 within this; which fits in this share of the GPU's memory, counting this
# much for the runtime's own workspace beside weights and KV; and, where nothing was measured on
# this GPU yet, at most the largest size measured fast enough on a GPU (Qwen2.5-Coder-1.5B's
# shape: FP16 decode 3.2 ms/token, prefill of 1,024 tokens 8.5 ms on a lent H200).
T_FIRST_SUGGESTION_P95_MS = 150.0
GPU_MEMORY_SHARE = 0.85
GPU_MEMORY_OVERHEAD_BYTES = 1 << 30
UNMEASURED_MAX_PARAMS_M = 1600

# The background prefill feeds chunks of about this many milliseconds at the model's measured
# prefill rate (a keystroke arriving mid-warm-up waits for at most one chunk), in multiples of
# the smallest size and at most the largest. Smaller chunks cost more per token: Qwen 0.5B's
# fast model on 2 cores, 1,500 tokens: 2.0 / 1.7 / 1.56 / 1.52 ms a token in chunks of 32 / 64 /
# 128 / 256 (docs/cpu-code-model.md); 32-token chunks made warming 30% slower.
T_WARM_CHUNK_MS = 120.0
WARM_CHUNK_TOKENS = (32, 256)
# Prefill seconds per token before a model has been measured (the fast model on 2 CPU cores:
# 1.5-3.5 ms, depending on the day's host); measured prefills of at least MEASURE_MIN_TOKENS
# replace it, averaged.
PREFILL_S_PER_TOKEN = 0.002
MEASURE_MIN_TOKENS = 32
PREFILL_RATE_NEW_WEIGHT = 0.3  # each measured pass's share of the running average
# Long prompts are fed in chunks so cancel/deadline are honoured mid-prefill; 256 was also the
# fastest chunk for a 1024-token prefill of the fast model here (1.54 s vs 1.66 s at 512, 1.94 s whole).
PREFILL_CHUNK_TOKENS = 256
# Waiting for a held slot pays when it holds this many more of the prompt than any free one.
WAIT_FOR_TOKENS = 32
# A new slot rather than overwriting a long cached sequence, up to this many slots (beyond, the
# least recently used one goes): a prompt from a prefill in progress, one for the nearest lines,
# one for the suggestion computed ahead, one spare.
KEEP_KV_SLOTS = 4
# The KV store (inference/kv_store.py): prompts the background prefill finished, on disk. Heads
# are found at block boundaries; prompts shorter than the minimum (or a gain smaller than half
# of it) are not worth a disk read; writes waiting beyond the pending items are dropped.
# A cached tail moved by an edit before it (a FIM suffix) is reused when at least this long.
SHIFT_MIN_TOKENS = 16
KV_STORE_BLOCK_TOKENS = 64
KV_STORE_MIN_TOKENS = 256
KV_STORE_PENDING_ITEMS = 2
KV_STORE_BYTES = 1 << 30
HEAL_MAX_INDENT_CHARS = 41  # a line break and 40 columns of indentation
METRICS_WINDOW_REQUESTS = 512  # recent requests per latency series
# Each model's KV cache in memory (the server's kvCacheMB setting says it in MB).
KV_CACHE_BYTES = 768 << 20
MAX_NEW_TOKENS = 64  # a completion's, unless the caller says (the server's maxTokens setting)
# Finished completions by prompt: on disk, and the most recent ones in memory as well.
COMPLETION_CACHE_BYTES = 64 << 20
COMPLETION_CACHE_ITEMS = 512
# A model that failed this many times in a row is left out this long, then tried once again.
BREAKER_FAILURES = 3
BREAKER_COOLDOWN_S = 30.0

# -- Loops -------------------------------------------------------------------------------------

LOOP_PIECE_CHARS = (3, 32)  # a repeated piece this long: shorter runs (`0, 0, 0`, `====`) are code
LOOP_END_TIMES = 4  # the decode loop stops at the fourth time in a row at the end of the text
LOOP_LINE_TIMES = 3  # post-processing cuts at the third time within a line, or the third same line
LOOP_TAIL_CHARS = 128  # how much of the end of the text the decode loop looks at, per token
# Names that exist (inference/names.py): the bonus, in logits, of tokens that keep the identifier
# at the cursor on a known name. 4 and 8 gained 1 of 48 mid-word positions on MCP Python, 16 and
# 24 gained 3; a mask (1e9) lost 4, since float32 cannot order logits that large. At 16 a name
# being made up wins only where the model is all but certain of it.
NAMES_BONUS_LOGITS = 16.0
