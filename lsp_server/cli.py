"""The `fastcomplete` command. Each subcommand parses arguments and calls one plain function."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from models.genai_build import NBitsScheme

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


def _fast_choice(path: Path | None) -> dict | None:
    """bench/fast_choice.py's report: its pick and what it measured."""
    if path is None:
        return None
    try:
        report = json.loads(path.read_text())
        return {
            "bits": int(report["chosen_bits"]),
            "basis": f"measured: {path.name} ({report.get('device', '?')})",
            "measured": report["rows"],
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(
            f"fastcomplete: --fast-choice {path}: not a fast_choice report ({exc})"
        ) from None


def _models_build(args: argparse.Namespace) -> int:
    from models.build import BuildRequest, build
    from models.build_env import (
        install_build_env,
        installed_build_env,
        missing_build_tools,
        run_in_build_env,
    )

    if args.bits == 16 and not args.cuda:
        print(
            "fastcomplete: --bits 16 (an FP16 fast model) is for CUDA builds: add --cuda",
            file=sys.stderr,
        )
        return EXIT_ERROR
    missing = missing_build_tools()
    if missing:  # a server installed without the build tools (uv tool, pipx)
        python = installed_build_env()
        if python is None and args.install_build_env:
            python = install_build_env()
        if python is None:
            print(
                f"fastcomplete: building a model needs {', '.join(missing)}, which the server "
                "does not install. Either:\n"
                "  fastcomplete models build --install-build-env   (installs them under "
                "$FASTCOMPLETE_HOME: a few GB from PyPI, once)\n"
                "  make models                                      (in a clone of the repository)",
                file=sys.stderr,
            )
            return EXIT_ERROR
        return run_in_build_env(python, [a for a in args.argv if a != "--install-build-env"])

    request = BuildRequest(
        name=args.name,
        model=args.model,
        from_gguf=args.from_gguf,
        from_hf=args.from_hf,
        tiny=args.tiny,
        force=args.force,
        block_size=args.block_size,
        bits=args.bits,
        cuda=args.cuda,
        fast_choice=_fast_choice(args.fast_choice),
    )
    if request.fast_choice is not None and args.bits is None:
        request.bits = int(request.fast_choice["bits"])
    result = build(request, quiet=args.quiet)
    if not result.built:
        print(f"{result.name}: already built and intact at {result.path} (--force rebuilds)")
        return 0
    fig = result.manifests["fast"].validation
    print(
        f"{result.name}: built in {result.seconds:.0f} s at {result.path}\n"
        f"  fast vs standard top-1 agreement {fig['top1_agreement']:.3f} over {fig['tokens']} "
        f"tokens; NLL standard {fig['nll_standard']:.3f}, fast {fig['nll_fast']:.3f}"
    )
    return 0


def _models_list(args: argparse.Namespace) -> int:
    from models.catalogue import CATALOGUE
    from models.registry import list_models

    statuses = list_models()
    built = {s.name for s in statuses}
    if args.json and args.catalogue:
        catalogue = [
            {
                "name": e.name,
                "summary": e.summary,
                "download_bytes": e.gguf_bytes,
                "wheels": len(e.wheels),
                "fim": e.fim,
                "license": e.license,
                "built": e.name in built,
            }
            for e in CATALOGUE.values()
        ]
        print(json.dumps(catalogue, indent=2))
        return 0
    if args.json:
        print(json.dumps([s.to_json() for s in statuses], indent=2))
        return 0
    print("can be built (fastcomplete models build --model NAME):")
    for e in CATALOGUE.values():
        mark = "built" if e.name in built else f"{e.gguf_bytes / 1e6:.0f} MB download"
        print(f"  {e.name:<20} {mark:<18} {e.summary}")
    print("built:")
    if not statuses:
        print("  no models built yet: run `fastcomplete models build`")
    for s in statuses:
        info = s.to_json()
        size = f"{info['size_bytes'] / 1e6:.0f} MB" if info["size_bytes"] else "?"
        agree = (info["validation"] or {}).get("top1_agreement")
        state = "ok" if s.manifest and not s.problems else "BROKEN: " + "; ".join(s.problems)
        print(
            f"{s.name:<20} {s.variant:<9} {info['precision'] or '?':<17} {size:>7}  "
            f"agreement {agree}  {state}"
        )
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from lsp_server.doctor import doctor

    return doctor(as_json=args.json)


def _models_measure(args: argparse.Namespace) -> int:
    from inference.device import gpu_present
    from inference.model_choice import Gpu, gpu_default, gpu_info, record_p95
    from inference.paths import DEFAULT_MODEL, GPU_DEFAULT_MODEL, models_dir, variant_dir
    from inference.tuning import T_FIRST_SUGGESTION_P95_MS
    from models.measure import NEW_TOKENS, PROMPT_TOKENS, first_suggestion

    gpu = gpu_info() if gpu_present() else None
    if gpu is None and not args.allow_cpu:
        print(
            "fastcomplete: no GPU described by nvidia-smi: on a CPU the default is chosen by "
            "keystrokes saved, not measured here (--allow-cpu measures the CPU anyway)",
            file=sys.stderr,
        )
        return 2
    root = models_dir()
    built = [p.name for p in root.iterdir()] if root.is_dir() else []
    names = args.model or sorted(
        n for n in built if (root / n / "fast" / "manifest.json").is_file()
    )
    if not names:
        print(
            "fastcomplete: no model is built yet: run `fastcomplete models build`", file=sys.stderr
        )
        return EXIT_ERROR
    print(f"first suggestion: {PROMPT_TOKENS} prompt tokens cold, {NEW_TOKENS} new tokens")
    for name in names:
        result = first_suggestion(variant_dir(name, "fast"), prefer_gpu=gpu is not None)
        verdict = "within" if result.p95_ms <= T_FIRST_SUGGESTION_P95_MS else "over"
        print(
            f"  {name} ({result.device}): p50 {result.p50_ms:.0f} ms, p95 {result.p95_ms:.0f} ms "
            f"({verdict} the {T_FIRST_SUGGESTION_P95_MS:.0f} ms budget)"
        )
        if result.device == "cuda" and gpu is not None:
            record_p95(gpu, name, result.p95_ms)
        elif args.allow_cpu:
            record_p95(Gpu("cpu", 0), name, result.p95_ms)
    if gpu is not None:
        choice = gpu_default(GPU_DEFAULT_MODEL, DEFAULT_MODEL)
        print(f"default model on {gpu.name}: {choice.model} ({choice.reason})")
    return 0


def _models_verify(args: argparse.Namespace) -> int:
    from models.registry import verify

    statuses = verify(args.name)
    for s in statuses:
        print(f"{s.name} {s.variant}: " + ("ok" if not s.problems else "; ".join(s.problems)))
    return 0 if all(not s.problems for s in statuses) else EXIT_ERROR


def _complete(args: argparse.Namespace) -> int:
    """One completion through the server's own pipeline, as an editor with FILE open would get."""
    import contextlib
    import threading
    import time

    from inference.engine import Engine, EngineConfig
    from inference.errors import ModelLoadError
    from inference.router import FAST, STANDARD
    from lsp_server.completion import run_completion
    from lsp_server.completion_plan import Cursor, plan_at
    from lsp_server.languages import EXTENSIONS
    from lsp_server.settings import Settings

    text = args.file.read_text()
    language_id = args.language or EXTENSIONS.get(args.file.suffix, "")
    settings = Settings(
        fastMode=not args.standard,
        maxTokens=args.max_tokens,
        multiline="never" if args.single_line else Settings.multiline,
    )
    engine = Engine(EngineConfig(cache_dir=None if args.no_cache else EngineConfig().cache_dir))
    # Both models loaded first, as the server does after `initialize`: the prompt's budget is in
    # the answering model's tokens, and a syntax retry on the standard model must not wait on a
    # load. A model that cannot load leaves the other to answer, as in the server.
    started = time.perf_counter()
    for variant in (FAST, STANDARD):
        with contextlib.suppress(ModelLoadError):
            engine.load(variant)
    load_ms = round((time.perf_counter() - started) * 1000, 1)
    cursor = Cursor(text, args.line, args.character, language_id, args.file.resolve().as_uri())
    plan = plan_at(engine, cursor, settings)
    warm_ms = None
    if plan.prompt.strip() and not args.cold:
        # An editor warms the prompt where the cursor rests before the user asks.
        started = time.perf_counter()
        engine.warm(plan.serving, plan.prompt, plan.tokens, threading.Event(), plan.config.heal)
        warm_ms = round((time.perf_counter() - started) * 1000, 1)
    done = run_completion(engine, plan, text, language_id, cancel=threading.Event())
    result = done.result
    gen = result.generation if result else None
    timings = {
        "prompt_tokens": gen.prompt_tokens if gen else None,
        "trimmed_tokens": gen.trimmed_tokens if gen else None,
        "reused_tokens": gen.reused_tokens if gen else None,
        "new_tokens": gen.new_tokens if gen else None,
        "load_ms": load_ms,
        "warm_ms": warm_ms,
        "ttft_ms": round(gen.ttft_s * 1000, 1) if gen and gen.ttft_s is not None else None,
        "tpot_ms": round(gen.tpot_s * 1000, 1) if gen and gen.tpot_s is not None else None,
        "total_ms": round(gen.total_s * 1000, 1) if gen else 0.0,
        "deadline_ms": round((plan.config.deadline_s or 0) * 1000),
    }
    out = {
        "text": done.text,
        "raw_text": result.text if result else "",
        "model": result.model_id if result else None,
        "variant": result.variant if result else None,
        "finish": result.finish.value if result else "empty_prompt",
        "cached": bool(result and result.cached),
        "fallback": bool(result and result.fallback),
        "single_line": plan.site.single_line,
        "syntax_rejected": done.syntax_rejected,
        **timings,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    if done.text:
        print(done.text)
    else:
        why = "it would add a syntax error" if done.syntax_rejected else "by post-processing"
        print(f"(nothing shown: the model wrote {out['raw_text']!r}, removed {why})")
    sys.stdout.flush()  # the text first, then the figures on stderr
    print(
        f"-- {out['model']} ({out['finish']}{', cached' if out['cached'] else ''}"
        f"{', fallback' if out['fallback'] else ''}): prompt {timings['prompt_tokens']} tokens "
        f"({timings['reused_tokens']} reused), {timings['new_tokens']} new, "
        f"warm-up {warm_ms} ms, TTFT {timings['ttft_ms']} ms, TPOT {timings['tpot_ms']} ms, "
        f"total {timings['total_ms']} ms",
        file=sys.stderr,
    )
    return 0


def _serve(args: argparse.Namespace) -> int:
    from lsp_server.observability import setup_logging
    from lsp_server.server import serve

    # stdout carries the protocol: logs go to stderr (the editor's log) and a rotating file.
    setup_logging(args.verbose, args.log_file)
    serve(tcp=args.tcp, metrics_port=args.metrics_port, allow_remote=args.allow_remote_host)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from lsp_server.demo import main as demo_main

    return demo_main()


def _eval(args: argparse.Namespace) -> int:
    from inference.engine import Engine, EngineConfig
    from lsp_server.evaluation import (
        ABLATIONS,
        collect_cases,
        default_roots,
        print_report,
        run_eval,
    )

    if args.workspace:
        return _eval_workspace(args)
    roots = [args.path] if args.path else default_roots()
    cases = collect_cases(roots, args.language, args.n, args.seed)
    if not cases:
        print(f"fastcomplete: error: no source files found under {roots}", file=sys.stderr)
        return EXIT_ERROR
    ablations = ABLATIONS if args.ablations else {"full pipeline": ABLATIONS["full pipeline"]}
    engine = Engine(EngineConfig(cache_dir=None, cache_memory_items=0, kv_store_dir=None))
    report = run_eval(engine, cases, ablations)
    print_report(report, len(cases))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"cases": len(cases), "report": report}, indent=2))
    return 0


def _eval_workspace(args: argparse.Namespace) -> int:
    from inference.engine import Engine, EngineConfig
    from inference.paths import fastcomplete_home
    from lsp_server.evaluation import (
        WORKSPACE_ROWS,
        print_report,
        run_workspace_eval,
        workspace_cases,
    )
    from lsp_server.exclusions import Exclusions

    root = args.workspace.resolve()
    if not root.is_dir():
        print(f"fastcomplete: error: {root} is not a folder", file=sys.stderr)
        return EXIT_ERROR
    cases = workspace_cases(root, args.n, args.seed, Exclusions(root))
    if not cases:
        print(f"fastcomplete: error: no source files found under {root}", file=sys.stderr)
        return EXIT_ERROR
    rows = WORKSPACE_ROWS if args.ablations else dict(list(WORKSPACE_ROWS.items())[:2])
    if args.workspace_only:
        rows = dict(list(WORKSPACE_ROWS.items())[1:2])
    if args.rows:
        wanted = [w.strip() for w in args.rows.split(",")]
        rows = {k: v for k, v in WORKSPACE_ROWS.items() if any(w in k for w in wanted)}
    engine = Engine(EngineConfig(cache_dir=None, cache_memory_items=0, kv_store_dir=None))
    variants = tuple(args.models.split(","))
    report = run_workspace_eval(
        engine, root, cases, rows, variants, store_dir=fastcomplete_home() / "index"
    )
    print(f"workspace {root}")
    print_report(report, len(cases))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"workspace": str(root), "cases": len(cases), "report": report}
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from inference.paths import selected_model
    from lsp_server.settings import Settings

    parser = argparse.ArgumentParser(prog="fastcomplete", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    models = sub.add_parser("models", help="build, list and verify models").add_subparsers(
        dest="models_command", required=True
    )
    b = models.add_parser("build", help="build the standard (FP32) and fast (INT8) models")
    src = b.add_mutually_exclusive_group()
    src.add_argument(
        "--model",
        metavar="NAME",
        help=f"a catalogue model (`models list`); default here: {selected_model()}",
    )
    src.add_argument("--from-gguf", type=Path, metavar="FILE", help="a Llama-family GGUF file")
    src.add_argument("--from-hf", type=Path, metavar="DIR", help="a Hugging Face model folder")
    src.add_argument("--tiny", action="store_true", help="a tiny random model for tests")
    b.add_argument("--name", help="model name under $FASTCOMPLETE_HOME/models")
    b.add_argument("--force", action="store_true", help="rebuild even if a valid build exists")
    b.add_argument(
        "--block-size",
        type=int,
        choices=(16, 32, 64, 128),
        default=NBitsScheme.block_size,
        help="fast model's 8-bit block size: 32 (default) keeps the most quality, 128 prefills "
        "~25%% faster",
    )
    b.add_argument(
        "--bits",
        type=int,
        choices=(16, 8, 4),
        default=None,
        help="fast model's weight bits: 8 (the CPU's default) or 4 (smaller, lower agreement); "
        "16 (FP16, --cuda only, the default there: the standard graph, loaded once)",
    )
    b.add_argument(
        "--fast-choice",
        type=Path,
        metavar="FILE",
        help="build the fast model bench/fast_choice.py picked on this GPU (its --json report)",
    )
    b.add_argument(
        "--cuda",
        action="store_true",
        help="CUDA graphs for a GPU machine (FP16 standard model); built and checked on the CPU "
        "too, where there is no GPU",
    )
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    b.add_argument(
        "--install-build-env",
        action="store_true",
        help="where the build tools are missing (an installed server), install them under "
        "$FASTCOMPLETE_HOME first (a few GB from PyPI, once)",
    )
    b.set_defaults(func=_models_build)

    lst = models.add_parser("list", help="list built models")
    lst.add_argument("--json", action="store_true", help="the built models as JSON")
    lst.add_argument(
        "--catalogue", action="store_true", help="with --json: what can be built instead"
    )
    lst.set_defaults(func=_models_list)

    doc = sub.add_parser("doctor", help="what this machine will use and why; what to fix")
    doc.add_argument("--json", action="store_true", help="the checks as JSON (:checkhealth)")
    doc.set_defaults(func=_doctor)

    mea = models.add_parser(
        "measure", help="time built models' first suggestion on this GPU (picks the GPU default)"
    )
    mea.add_argument("--model", action="append", help="a built model (repeatable; default: all)")
    mea.add_argument("--allow-cpu", action="store_true", help="measure on the CPU without a GPU")
    mea.set_defaults(func=_models_measure)

    ver = models.add_parser("verify", help="check sha256s and run one forward pass")
    ver.add_argument("name", nargs="?", default=selected_model())
    ver.set_defaults(func=_models_verify)

    srv = sub.add_parser("serve", help="run the language server (LSP over stdio)")
    srv.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    srv.add_argument(
        "--allow-remote-host",
        action="store_true",
        help="allow --tcp on an address other machines can reach (your code crosses the network)",
    )
    srv.add_argument("--verbose", action="store_true", help="debug logging (message bodies too)")
    srv.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on 127.0.0.1:PORT")
    srv.add_argument(
        "--log-file", type=Path, help="JSON-lines log (default $FASTCOMPLETE_HOME/logs/server.log)"
    )
    srv.set_defaults(func=_serve)

    e = sub.add_parser("eval", help="line-completion benchmark on a source tree")
    e.add_argument("path", nargs="?", type=Path, help="default: the Python standard library")
    e.add_argument("--language", help="only this language id (python, typescript, go, ...)")
    e.add_argument("--n", type=int, default=60, help="cursor positions")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--ablations", action="store_true", help="also without context/healing/post")
    e.add_argument("--json", type=Path, help="write the figures here too")
    e.add_argument(
        "--workspace",
        type=Path,
        metavar="DIR",
        help="positions cut from this repository's files, the rest of it indexed as the workspace",
    )
    e.add_argument(
        "--models", default="fast,standard", help="with --workspace: fast, standard or both"
    )
    e.add_argument(
        "--workspace-only",
        action="store_true",
        help="with --workspace: only the row with the workspace's context (no file-only row)",
    )
    e.add_argument(
        "--rows",
        metavar="TEXT,...",
        help="with --workspace: the rows whose names contain one of these (e.g. "
        "'workspace:,without names')",
    )
    e.set_defaults(func=_eval)

    d = sub.add_parser("demo", help="an LSP client session against `fastcomplete serve`")
    d.set_defaults(func=_demo)

    c = sub.add_parser("complete", help="complete FILE at a position (LSP line/UTF-16 character)")
    c.add_argument("file", type=Path)
    c.add_argument("--line", type=int, required=True, help="0-based line")
    c.add_argument("--character", type=int, required=True, help="0-based UTF-16 column")
    c.add_argument("--json", action="store_true")
    c.add_argument("--standard", action="store_true", help="use the standard model (fast mode off)")
    c.add_argument("--language", help="LSP languageId (default: from the file extension)")
    c.add_argument(
        "--max-tokens", type=int, default=Settings.maxTokens, help="the maxTokens setting"
    )
    c.add_argument("--single-line", action="store_true", help='the setting multiline: "never"')
    c.add_argument("--cold", action="store_true", help="no idle warm-up of the prompt first")
    c.add_argument("--no-cache", action="store_true", help="bypass the completion cache")
    c.set_defaults(func=_complete)
    return parser


def _known_errors() -> tuple[type[Exception], ...]:
    from inference.errors import ModelLoadError
    from inference.manifest import ManifestError
    from inference.router import RoutingError
    from lsp_server.errors import BadRequest
    from lsp_server.positions import PositionError
    from models.build import BuildError
    from models.genai_build import GraphBuildError
    from models.source import SourceError
    from models.validate import ValidationError

    return (
        BuildError,
        GraphBuildError,
        ManifestError,
        SourceError,
        ValidationError,
        ModelLoadError,
        RoutingError,
        PositionError,
        BadRequest,
    )


def run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return func(args)
    except KeyboardInterrupt:
        print("fastcomplete: interrupted; nothing was left half-made", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if isinstance(exc, (*_known_errors(), OSError)):
            print(f"fastcomplete: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        raise


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.argv = argv  # `models build` may run itself again in the build environment
    return run(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
