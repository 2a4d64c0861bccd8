"""The GPU default with its real weights on a lent GPU, in one prepared run.

    bash bench/gpu_real.sh prepare [--model NAME] [--carry build/gpu_carry]      # here
    bash bench/gpu_real.sh run --carry DIR --out DIR [--model NAME]              # there
    bash bench/gpu_real.sh run --dry-run                                         # either

A lent GPU machine reaches no registry and takes at most 64 MiB per call, so everything it needs
is prepared here and carried in pieces: the cp312 wheels it lacks (onnxruntime-gpu, the graph
builder, gguf and the server's pure-Python dependencies), the model's GGUF as `models build`
fetched it (sha256-pinned by the catalogue), the build's config, tokenizer and manifests (no
weights), and the eval repositories. `prepare` packs them into one tar split into <= 60 MiB
pieces, one folder per piece (carry one folder per call), with SHA256SUMS.

`run` joins and checks the pieces, installs the wheels into a folder of their own, turns the GGUF
into FP16 transformers weights (transformers 5's GGUF loader, filled into the config's model),
builds the CUDA graphs, then runs each measurement with its own time limit, writing every result
under --out: bench/gpu_check (decode with and without CUDA graphs), bench/fast_choice (16/8/4-bit
fast models), `models measure` (the first suggestion, which picks the GPU default), the workspace
eval, bench/first_ask, bench/typing_replay, bench/assist and bench/explain_speed. A step that
fails is recorded and the next one runs.

`--dry-run` checks what can be checked without a GPU: the carry (when given), and that every
step's command line is accepted by its program, then prints the plan.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIECE_BYTES = 60 << 20
BUNDLE = "bundle.tar"
SUMS = "SHA256SUMS"
PY_TARGET = ("--python-version", "3.12", "--implementation", "cp", "--abi", "cp312")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64")
# What the lent machine lacks (it has torch, transformers 5, onnx, numpy, tokenizers; DESIGN.md).
WHEELS = (
    "onnxruntime-gpu==1.31.1",
    "onnxruntime-genai==0.18.0",
    "onnx-ir==1.1.0",
    "gguf",
    "tree-sitter",
    "tree-sitter-python",
    "tree-sitter-javascript",
    "tree-sitter-typescript",
    "tree-sitter-go",
    "tree-sitter-rust",
    "pygls",
    "lsprotocol",
    "attrs",
    "cattrs",
    "diskcache",
    "pathspec",
    "tantivy",
    "jinja2",
    "flatbuffers",  # onnxruntime's
)
EVAL_REPOS = ("mcp-python/mcp", "mcp-js/esm", "fastcomplete-ca1da2e")
HF_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...]  # after the Python
    timeout_s: int

    @property
    def module(self) -> str:
        return self.argv[1]


def steps(model: str, out: Path, repos: Path, quick: bool = False) -> list[Step]:
    """The measurements, in the order they run (the cheapest and most telling first); `repos`:
    where the eval repositories are."""
    n = "4" if quick else "20"
    evals = [
        Step(
            f"eval-{repo.split('/')[0]}",
            (
                "-m",
                "lsp_server.cli",
                "eval",
                "--workspace",
                str(repos / repo),
                "--n",
                n,
                "--models",
                "fast",
                "--workspace-only",
                "--json",
                str(out / f"eval-{i}.json"),
            ),
            150,
        )
        for i, repo in enumerate(EVAL_REPOS)
    ]
    return [
        Step(
            "gpu_check",
            (
                "-m",
                "bench.gpu_check",
                "--model",
                model,
                "--contexts",
                "256,1024,2048",
                "--json",
                str(out / "gpu_check.json"),
            ),
            120,
        ),
        Step(
            "fast_choice",
            (
                "-m",
                "bench.fast_choice",
                "--model",
                model,
                "--bits",
                "16,8,4",
                "--json",
                str(out / "fast_choice.json"),
            ),
            240,
        ),
        Step("models_measure", ("-m", "lsp_server.cli", "models", "measure"), 90),
        *evals,
        Step(
            "first_ask",
            (
                "-m",
                "bench.first_ask",
                "--positions",
                "6" if quick else "30",
                "--configs",
                "fast",
                "--json",
                str(out / "first_ask.json"),
            ),
            180,
        ),
        Step(
            "typing_replay",
            ("-m", "bench.typing_replay", "--fast-only", "--json", str(out / "typing.json")),
            150,
        ),
        Step(
            "assist",
            ("-m", "bench.assist", "--configs", "fast")
            + (("--quick",) if quick else ())
            + ("--json", str(out / "assist.json")),
            300,
        ),
        Step("explain_speed", ("-m", "bench.explain_speed", "--reps", "2"), 90),
    ]


# -- prepare (here) ------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def split(bundle: Path, carry: Path) -> list[Path]:
    """`bundle` in <= PIECE_BYTES pieces, carry/NN/piece, with SHA256SUMS in the first folder."""
    pieces = []
    with bundle.open("rb") as f:
        while block := f.read(PIECE_BYTES):
            folder = carry / f"{len(pieces):02d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "piece").write_bytes(block)
            pieces.append(folder / "piece")
    lines = [f"{sha256(bundle)}  {BUNDLE}"]
    lines += [f"{sha256(p)}  {p.parent.name}/piece" for p in pieces]
    (carry / "00" / SUMS).write_text("\n".join(lines) + "\n")
    return pieces


def join(carry: Path, bundle: Path) -> None:
    """The pieces back into `bundle`, each and the whole checked against SHA256SUMS."""
    sums = dict(
        reversed(line.split(maxsplit=1)) for line in (carry / "00" / SUMS).read_text().splitlines()
    )
    names = sorted(n for n in sums if n != BUNDLE)
    with bundle.open("wb") as out:
        for name in names:
            piece = carry / name
            if not piece.is_file():
                raise SystemExit(f"gpu_real: piece {name} was not carried")
            if sha256(piece) != sums[name]:
                raise SystemExit(f"gpu_real: piece {name}: sha256 differs (carry it again)")
            out.write(piece.read_bytes())
    if sha256(bundle) != sums[BUNDLE]:
        raise SystemExit("gpu_real: the joined bundle's sha256 differs")


def prepare(model: str, carry: Path, dry_run: bool) -> int:
    from inference.paths import fastcomplete_home, model_dir
    from models.catalogue import entry, sources_dir

    item = entry(model)
    gguf = sources_dir(model) / item.gguf
    home = fastcomplete_home()
    needed = {
        "GGUF (`fastcomplete models build --model NAME` fetches it)": gguf,
        "the build's hf/ config": model_dir(model) / "hf" / "config.json",
        "the build's manifests": model_dir(model) / "fast" / "manifest.json",
        **{
            f"eval repository {r} (bench/eval_repos.sh)": home / "eval-repos" / r
            for r in EVAL_REPOS
        },
    }
    missing = [f"{what}: {path}" for what, path in needed.items() if not path.exists()]
    for line in missing:
        print(f"gpu_real: missing {line}", file=sys.stderr)
    print(f"gpu_real: would carry {', '.join(WHEELS)} (cp312 wheels), {gguf.name}, eval repos")
    if missing or dry_run:
        return 1 if missing else 0
    if gguf.stat().st_size != item.gguf_bytes or sha256(gguf) != item.gguf_sha256:
        raise SystemExit(f"gpu_real: {gguf}: not the catalogue's pinned file")
    staging = carry.parent / "gpu_staging"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(carry, ignore_errors=True)
    wheels = staging / "wheels"
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:"]
    download += ["--no-deps", *PY_TARGET, *platforms, "-d", str(wheels), *WHEELS]
    subprocess.run(download, check=True)
    with tarfile.open(staging / BUNDLE, "w") as tar:
        tar.add(wheels, "wheels")
        tar.add(gguf, f"gguf/{gguf.name}")
        for name in HF_FILES:
            tar.add(model_dir(model) / "hf" / name, f"hf/{name}")
        for variant in ("standard", "fast"):
            tar.add(model_dir(model) / variant / "manifest.json", f"manifests/{variant}.json")
        for repo in EVAL_REPOS:
            tar.add(home / "eval-repos" / repo, f"eval-repos/{repo}")
        meta = staging / "meta.json"
        meta.write_text(json.dumps({"model": model, "gguf_sha256": item.gguf_sha256}))
        tar.add(meta, "meta.json")
    pieces = split(staging / BUNDLE, carry)
    shutil.rmtree(staging)
    print(f"gpu_real: {len(pieces)} pieces under {carry}/NN/ (carry one folder per call)")
    return 0


# -- run (there) ---------------------------------------------------------------------------------


def gguf_to_fp16(gguf: Path, hf: Path) -> None:
    """FP16 transformers weights from the GGUF: transformers 5 keeps GGUF weights packed and will
        not save them, so the config's model is made and its state filled with the tensors its GGUF
    loader returns (it returns them; it does not load them into `model_to_load`)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(hf)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float16)
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    missing = [k for k in missing if k != "lm_head.weight" or not config.tie_word_embeddings]
    if missing or unexpected:
        raise SystemExit(f"gpu_real: GGUF weights do not fill the model: {missing} {unexpected}")
    model.tie_weights()
    model.to(torch.float16).save_pretrained(hf)


def build_cuda_model(work: Path, model: str) -> Path:
    """The GPU default's CUDA graphs under $FASTCOMPLETE_HOME, with manifests from the build
    here (their graph, precision, files and fast-model choice rewritten for these graphs)."""
    from inference.manifest import Manifest
    from inference.paths import model_dir
    from models.build import BuildRequest, fast_graph, rewrite_manifest
    from models.genai_build import build_graph

    root = model_dir(model)
    shutil.rmtree(root, ignore_errors=True)
    hf = root / "hf"
    shutil.copytree(work / "hf", hf)
    gguf = next((work / "gguf").glob("*.gguf"))
    gguf_to_fp16(gguf, hf)
    python = Path(sys.executable)
    standard = build_graph(hf, root / "standard", None, python, cuda=True)
    request = BuildRequest(model=model, cuda=True)
    fast_graph(hf, root, request, python, standard)
    for variant in ("standard", "fast"):
        data = json.loads((work / "manifests" / f"{variant}.json").read_text())
        folder = root / variant
        shutil.copy2(hf / "tokenizer.json", folder / "tokenizer.json")
        rewrite_manifest(Manifest.from_json(data), folder, request)
    check_nll(root, json.loads((work / "manifests" / "standard.json").read_text()))
    return root


def check_nll(root: Path, template: dict) -> None:
    """The graphs built there predict the build's sample text as the build here did (a model
    whose weights did not load predicts nothing: it is stopped before anything is measured)."""
    from inference.paths import MODEL_FILE
    from models.validate import MAX_NLL_GAP_FP16, nll, sample_ids, teacher_forced_logits

    bos = template["bos_token_id"] if template["bos_policy"] == "always" else None
    ids = sample_ids(root / "standard" / "tokenizer.json", bos)
    logits = teacher_forced_logits(root / "standard" / MODEL_FILE, ids, gpu=True)
    got, want = nll(logits[:-1], ids[1:]), template["validation"]["nll_standard"]
    print(f"gpu_real: sample NLL {got:.4f} here, {want:.4f} in the build it came from")
    if abs(got - want) > 2 * MAX_NLL_GAP_FP16:
        raise SystemExit(f"gpu_real: the built graph's NLL {got:.4f} is not the build's {want}")


def accepted(step: Step, env: dict[str, str]) -> str | None:
    """None when the step's program accepts its command line; else what it said. The program
    is run up to its argument parsing only."""
    probe = (
        "import argparse, runpy, sys\n"
        "parse = argparse.ArgumentParser.parse_args\n"
        "def checked(self, *a, **k):\n"
        "    parse(self, *a, **k)\n"
        "    raise SystemExit(0)\n"
        "argparse.ArgumentParser.parse_args = checked\n"
        "sys.argv = [sys.argv[1], *sys.argv[2:]]\n"
        "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
    )
    argv = list(step.argv[1:])
    result = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
        check=False,
    )
    return None if result.returncode == 0 else (result.stderr.strip().splitlines() or ["?"])[-1]


def run_steps(plan: list[Step], out: Path, env: dict[str, str]) -> dict[str, object]:
    results: dict[str, object] = {}
    for step in plan:
        argv = [sys.executable, *step.argv]
        print(f"gpu_real: {step.name}: {' '.join(argv[1:])}", flush=True)
        started = time.monotonic()
        with (out / f"{step.name}.txt").open("w") as log:
            try:
                code = subprocess.run(
                    argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=REPO,
                    timeout=step.timeout_s,
                    check=False,
                ).returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        results[step.name] = {"rc": code, "seconds": round(time.monotonic() - started, 1)}
        (out / "steps.json").write_text(json.dumps(results, indent=2))
    return results


def run(args: argparse.Namespace) -> int:
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", FASTCOMPLETE_MODEL=args.model)
    work = Path(args.work)
    env.setdefault("FASTCOMPLETE_HOME", str(work / "home"))
    home = Path(env["FASTCOMPLETE_HOME"])
    plan = steps(args.model, out, home / "eval-repos", args.quick)
    if args.steps:
        wanted = args.steps.split(",")
        unknown = set(wanted) - {s.name for s in plan}
        if unknown:
            raise SystemExit(f"gpu_real: no step {', '.join(sorted(unknown))}")
        plan = [s for s in plan if s.name in wanted]
    if args.dry_run:
        if args.carry is not None:
            join(args.carry, out / BUNDLE)
            (out / BUNDLE).unlink()
            print(f"gpu_real: the carry under {args.carry} is whole")
        bad = {s.name: why for s in plan if (why := accepted(s, env)) is not None}
        for step in plan:
            verdict = f"REFUSED: {bad[step.name]}" if step.name in bad else "accepted"
            print(f"gpu_real: {step.name} ({step.timeout_s} s): {' '.join(step.argv)}: {verdict}")
        return 1 if bad else 0
    if args.carry is None and not (home / "models" / args.model).is_dir():
        raise SystemExit("gpu_real: run needs --carry DIR (or --dry-run)")
    if args.carry is not None:
        setup(args.carry, work, home, env, args.model)
    else:  # a later call on the same warm machine: set up already
        env["PYTHONPATH"] = f"{work / 'site'}{os.pathsep}{REPO}"
    subprocess.run(["nvidia-smi"], stdout=(out / "nvidia-smi.txt").open("w"), check=False)
    results = run_steps(plan, out, env)
    failed = [name for name, r in results.items() if r["rc"] != 0]
    print(f"gpu_real: done; {len(plan) - len(failed)} of {len(plan)} steps ran clean; in {out}")
    return 1 if failed else 0


def setup(carry: Path, work: Path, home: Path, env: dict[str, str], model: str) -> None:
    """Join and unpack the carry, install its wheels, build the model's CUDA graphs."""
    join(carry, work / BUNDLE)
    with tarfile.open(work / BUNDLE) as tar:
        tar.extractall(work, filter="data")
    site = work / "site"
    wheels = sorted(str(p) for p in (work / "wheels").glob("*.whl"))
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps"]
    subprocess.run([*pip, "--target", str(site), *wheels], check=True)
    env["PYTHONPATH"] = f"{site}{os.pathsep}{REPO}"
    shutil.copytree(work / "eval-repos", home / "eval-repos", dirs_exist_ok=True)
    build = [sys.executable, "-m", "bench.gpu_real", "build", "--work", str(work)]
    subprocess.run([*build, "--model", model], env=env, cwd=REPO, check=True)


def main(argv: list[str] | None = None) -> int:
    from models.choice import GPU_DEFAULT_MODEL

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("prepare", "run", "build"):
        p = sub.add_parser(name)
        p.add_argument("--model", default=GPU_DEFAULT_MODEL)
        p.add_argument("--carry", type=Path, default=None)
        p.add_argument("--dry-run", action="store_true")
        p.add_argument("--out", type=Path, default=Path("build/gpu_real"))
        p.add_argument("--work", default="/tmp/gpu_real")
        p.add_argument("--quick", action="store_true", help="smaller evals (a smoke run)")
        p.add_argument("--steps", help="only these steps, comma-separated (a later call)")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        return prepare(args.model, args.carry or REPO / "build" / "gpu_carry", args.dry_run)
    if args.command == "build":  # a step of `run`, in the environment the wheels made
        print(f"gpu_real: built {build_cuda_model(Path(args.work), args.model)}")
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
