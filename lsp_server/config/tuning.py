"""Every tunable of the server, in one table, each with its unit in its name (`_S` seconds, `_MS`
milliseconds, `_TOKENS`, `_CHARS`, `_LINES`, `_ITEMS`, ...), as llama.vim keeps its defaults. The
settings a user changes live in lsp_server/config/settings.py; the engine's numbers in
inference/tuning.py; these are the numbers behind the server, measured on this project's
benchmarks (see docs/ for each)."""

from __future__ import annotations

# Where a name may begin and none is typed yet, the names the person's recent edits brought in
# get this much: a nudge toward what was just defined, not a mask.
RECENT_NAMES_BONUS_LOGITS = 4.0

# -- Completion --------------------------------------------------------------------------------

CHARS_PER_TOKEN = 3  # budgets in characters, and token counts before a tokenizer is loaded
# Known names are offered to the model when the identifier at the cursor has this many characters
# and no more than so many names start with it (more say little about which one is meant).
NAMES_MIN_WORD_CHARS = 1
NAMES_MAX_CANDIDATES = 64
SINGLE_LINE_DEADLINE_S = 1.5
MULTI_LINE_DEADLINE_S = 4.0
# A prefetch shares the machine with the keys typed while it runs (a line typed through): it
# gets more time than a request, and the request at its place waits for it rather than start again.
PREFETCH_DEADLINE_S = 3.0
DRAFT_TOKENS = 8
# A prompt whose uncached part would take longer than the request's prefill budget is answered
# from the nearest lines instead (a short prompt that fits the budget); its window moves in
# steps this small, and it never gets fewer tokens than this.
SHORT_STEP_LINES = 8
SHORT_MIN_TOKENS = 48
# Candidates ranked by the code after the cursor: how many, and how much of that code is scored
# (the rest of the line and the next non-blank lines, up to a size that keeps scoring cheap).
SCORED_SUFFIX_LINES = 2
SCORED_SUFFIX_CHARS = 120
SCORED_CANDIDATE_ITEMS = 3  # ranked by the code after the cursor (suffixScoring)
MAX_ALTERNATIVE_ITEMS = 3  # items an explicit request shows
# A short prompt's answer that post-processing rejected waits this long for the whole prompt's
# prefill to finish, then answers from it (a pause at a line's end gets it; a key cancels it).
T_WHOLE_WAIT_S = 3.0
# A model run whose request the editor cancelled (it does so as it sends the next key's) is
# stopped this long after, unless the next request took it over (lsp_server/inline/flights.py):
# the next request follows the cancel within a few milliseconds.
T_ADOPT_GRACE_MS = 50.0
REMEMBERED_PER_DOCUMENT_ITEMS = 4
REMEMBERED_DOCUMENTS = 8
# The document unchanged this long: the person is at rest, not typing (restPrefillMs applies).
T_REST_S = 1.0
# A place, for the suggestions held back after being passed over (rejectAfterShows): the code this
# far on each side of the anchor; the places remembered at most.
REJECTION_PLACE_CHARS = 200
REJECTION_PLACES = 512

# -- Background prefill ------------------------------------------------------------------------

# After an edit or an open, a moment beyond the completion's debounce for the request that usually
# follows to take over first (a plan started in the debounce is one the request waits for).
T_SETTLE_S = 0.03
# An aim this many characters on from the last prefilled one, on its line, is left to its request.
NEAR_CHARS = 24
# A plan in flight is finished first when the newer aim is at most this many lines from it (typing
# on: the two prompts share all but the last keys' tokens); a farther aim (a click, a jump, a
# focus elsewhere) shares little of it and is planned at once.
NEAR_LINES = 4

# -- Prompt ------------------------------------------------------------------------------------

# The prompt's window starts on a block of this many lines, and the index is asked with the block
# around the cursor: both stay put while the person types inside one block (KV reuse, caches).
WINDOW_STEP_LINES = 64
# The code after the cursor in a FIM prompt: whole lines, up to this many tokens. It follows the
# cursor in the prompt, so every keystroke prefills it again (measured in docs/quality.md, "Fill-in-the-middle").
FIM_SUFFIX_TOKENS = 128
# ... and a key's share of that work: the suffix is kept where computing it fits this many
# milliseconds at the model's measured prefill rate, else left out (lsp_server.completion.plan).
T_KEY_SUFFIX_MS = 40.0
FIM_SUFFIX_MAX_LINES = 40
LINE_REST_TOKENS = 32  # the rest of the cursor's line is cut beyond this (or the budget) in tokens
MAX_CHARS_PER_TOKEN = 6  # generous for code: beyond this a window is cut inside a line
RECENT_DOCUMENTS = 8  # other open/edited documents that may lend snippets to a prompt
# Beyond this, no tree is kept: completions parse the text around the cursor instead.
TREE_MAX_CHARS = 1 << 20
SNIPPET_CHUNK_LINES = 24
SNIPPET_MIN_SCORE = 0.12
DEFINITION_SHARE_DIVISOR = 3  # at most a third of the snippet budget goes to definitions
REPO_SHARE_DIVISOR = 3  # at most a third of the prompt's budget goes to other files
SIGNATURE_CHARS = 200

# -- Workspace index ---------------------------------------------------------------------------

# A window needs two distinct query terms (one shared name is chance) and this much BM25 score.
INDEX_MIN_MATCHED_TERMS = 2
INDEX_MIN_BM25 = 2.0
# Best windows considered when picking (overlaps, skips and budget drop some).
INDEX_CANDIDATE_WINDOWS = 64
BINARY_PROBE_BYTES = 8192
# A name defined in more places than this says nothing about which one is meant.
AMBIGUOUS_DEFINITIONS = 3
INDEX_PROGRESS_EVERY_S = 0.5

# -- Telemetry ---------------------------------------------------------------------------------

RETENTION_CHECKS_S = (30, 120)  # seconds after acceptance; Copilot's figures
LOG_BYTES = 5 << 20
LOG_BACKUP_FILES = 3

# -- Recent edits (lsp_server.workspace.recent_edits) ----------------------------------------------------

RECENT_EDITS_KEPT = 16  # hunks the workspace remembers
RECENT_EDITS_IN_PROMPT = 3  # the most recent ones a prompt quotes
RECENT_EDIT_MERGE_LINES = 3  # an edit this close to the hunk being written joins it
RECENT_EDIT_CONTEXT_LINES = 1  # lines quoted around a hunk
RECENT_EDIT_ENCLOSING_LINES = 2  # the lines that enclose it (its def, its class)
RECENT_EDIT_MAX_CHARS = 600
# A hunk of the document being edited this close above the cursor is in the prompt's window.
RECENT_EDIT_NEAR_LINES = 64

# -- Show or stay quiet (lsp_server.inline.show_gate) -------------------------------------------------

GATE_LANGUAGES = ("python", "typescript", "javascript", "go", "rust")  # a learned bias each
# A suggestion the gate gives less than this chance of being taken is held back (the
# showGateThreshold setting). On the seed's labels (below) 0.1 kept 77 of 78 taken and 191 of 473
# put to it, 0.05 kept 77 and 251, 0.15 kept 73 and 155 (docs/latency.md, issue 49).
GATE_MIN_PROBABILITY = 0.1
# Before any label of this person's: fitted by bench/gate_seed.py on 473 labels (78 taken) of
# the default model, Qwen2.5-Coder-0.5B, typing 24 regions of two of the unseen repositories
# (`bench/unseen.py keys --repos openai-agents-python,tableau-mcp --regions 12 --seed 11
# --settings '{"showGateThreshold": 0.0}'`; github-mcp-server stays out, as the check). Rests being
# typed through are rarely taken (a right suggestion is accepted when first shown); for this code
# model its own certainty counts (mean log-probability +0.32), unlike SmolLM2's (-0.14).
GATE_SEED_WEIGHTS: dict[str, float] = {
    "bias": 0.18,
    "mean_logprob": 0.32,
    "least_logprob": 0.12,
    "first_logprob": -0.05,
    "log_chars": -0.35,
    "multi_line": 0.65,
    "line_start": 0.25,
    "mid_word": 0.32,
    "prefetch": 0.20,
    "typed_through": -5.74,
    "lang_python": -0.23,
    "lang_typescript": 0.41,
}
GATE_PRIOR_WEIGHT = 50.0  # labels' worth of pull toward the seed in each refit
GATE_REFIT_LABELS = 20  # the weights are refit (and saved) after this many new labels
GATE_SAMPLES_KEPT = 2000  # labels kept per workspace, the newest
GATE_PENDING_PER_DOCUMENT = 4  # suggestions awaiting a label, per document
